#include "outbox/json_log.h"

#include <spdlog/pattern_formatter.h>

#include "outbox/log_fields.h"

namespace outbox {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if there is none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  // Overlong forms, surrogates and code points past U+10FFFF.
  if ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) > 0x9F) || (c == 0xF0 && b(i + 1) < 0x90) ||
      (c == 0xF4 && b(i + 1) > 0x8F))
    return 0;
  return n;
}

// %* in the json pattern: the message as the body of a JSON string.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    auto text = json_escaped(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedMessage>(); }
};

// %& in the json pattern: the thread's LogFields, each as ,"name":value. An inner
// field of the same name wins; fixed keys are never written twice.
class JsonFields : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    const auto& fields = LogFields::current();
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (shadowed(fields, i)) continue;
      const auto& f = fields[i];
      const bool fixed = f.name() == "time" || f.name() == "level" || f.name() == "pid" || f.name() == "msg";
      const std::string key = ",\"" + std::string(fixed ? "field_" : "") + json_escaped(f.name()) + "\":";
      dest.append(key.data(), key.data() + key.size());
      dest.append(f.json().data(), f.json().data() + f.json().size());
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonFields>(); }

 private:
  static bool shadowed(const std::vector<LogField>& fields, std::size_t i) {
    for (std::size_t k = i + 1; k < fields.size(); ++k)
      if (fields[k].name() == fields[i].name()) return true;
    return false;
  }
};

}  // namespace

std::string json_escaped(std::string_view text) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7F) {
      const char esc[] = {'\\', 'u', '0', '0', digits[c >> 4], digits[c & 0xF]};
      out.append(esc, 6);
    } else if (c >= 0x80) {
      // Keep valid UTF-8; a stray byte (from a broker or server message) would
      // make the whole line invalid JSON, so it becomes U+FFFD.
      if (auto n = utf8_length(text, i)) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
      out += "\\ufffd";
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  return out;
}

std::unique_ptr<spdlog::formatter> json_log_formatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JsonEscapedMessage>('*').add_flag<JsonFields>('&').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","pid":%P,"msg":"%*"%&})");
  return formatter;
}

}  // namespace outbox
