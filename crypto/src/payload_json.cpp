#include "outbox/payload_json.h"

#include <utility>
#include <vector>

namespace outbox {
namespace {

// A number's decimal value as (negative, significant digits, exponent of the last
// digit): "1.50", "15e-1" and "1.5" are all (false, "15", -1).
struct Decimal {
  bool negative = false;
  std::string digits;
  long exponent = 0;
  bool valid = false;
  bool operator==(const Decimal& o) const {
    if (!valid || !o.valid) return false;
    if (digits.empty() && o.digits.empty()) return true;  // 0 and -0.0
    return negative == o.negative && digits == o.digits && exponent == o.exponent;
  }
};

Decimal decimal_of(std::string_view s) {
  Decimal d;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) d.negative = s[i++] == '-';
  long fraction_digits = 0;
  bool in_fraction = false, any = false;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      in_fraction = true;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return d;  // "null" (an infinity dumped), or worse
    any = true;
    if (in_fraction) ++fraction_digits;
    if (!d.digits.empty() || s[i] != '0') d.digits.push_back(s[i]);
  }
  if (!any) return d;
  long exponent = 0;
  if (i < s.size()) {
    try {
      exponent = std::stol(std::string(s.substr(i + 1)));
    } catch (const std::exception&) {
      return d;  // an exponent past long: no double has it
    }
  }
  d.exponent = exponent - fraction_digits;
  while (!d.digits.empty() && d.digits.back() == '0') {
    d.digits.pop_back();
    ++d.exponent;
  }
  d.valid = true;
  return d;
}

// nlohmann's SAX events: tracks the path and depth, checks numbers, stops early.
class Checker {
 public:
  using json = nlohmann::json;
  explicit Checker(bool exact_numbers) : exact_numbers_(exact_numbers) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    value();
    return !exact_numbers_ || PayloadJson::same_number(text, v) || refuse(kInexact);
  }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(false); }
  bool key(json::string_t& k) {
    frames.back().key = k;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(true); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (e.id == kNumberOverflow) {  // past a double's range (1e400): the value it was to be
      value();
      return refuse(kInexact);
    }
    problem = "not valid JSON";
    frames.clear();
    return false;
  }

  std::string problem;
  // The open arrays and objects, one step each: index and key follow the values read.
  std::vector<PayloadJson::Step> frames;

 private:
  static constexpr int kNumberOverflow = 406;  // nlohmann's out_of_range.406
  static constexpr const char* kInexact =
      "a number with more digits or range than a double carries: serialised again it would change; "
      "send it as a string";

  bool value() {
    if (!frames.empty() && frames.back().array) ++frames.back().index;
    return true;
  }
  bool open(bool array) {
    value();
    if (frames.size() >= PayloadJson::kMaxDepth)
      return refuse("nested deeper than " + std::to_string(PayloadJson::kMaxDepth) + " levels");
    frames.emplace_back(array);
    return true;
  }
  bool close() {
    frames.pop_back();
    return true;
  }
  // Stops the parse; `frames` stay where it stopped.
  bool refuse(std::string why) {
    problem = std::move(why);
    return false;
  }

  bool exact_numbers_;
};

}  // namespace

bool PayloadJson::same_number(std::string_view text, double value) {
  return decimal_of(text) == decimal_of(nlohmann::json(value).dump());
}

PayloadJson::PayloadJson(std::string_view text, bool exact_numbers) {
  Checker checker(exact_numbers);
  if (!nlohmann::json::sax_parse(text, &checker)) {
    problem_ = checker.problem.empty() ? "not valid JSON" : checker.problem;
    steps_ = std::move(checker.frames);
    for (const auto& s : steps_) path_ += s.array ? "[" + std::to_string(s.index) + "]" : "." + s.key;
    return;
  }
  value_ = nlohmann::json::parse(text);  // checked above: neither throws nor nests too deep
}

}  // namespace outbox
