#pragma once
// PayloadJson: parses an event payload that will be written out again.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace outbox {

// Parses payload text for code that changes fields and serialises the payload again
// (the encryptor, the decryptor), refusing what that would damage or crash on:
// - nesting deeper than kMaxDepth: nlohmann::json copies and dumps recursively, so
//   an 80 KB `[[[[…]]]]` would overflow the stack;
// - with `exact_numbers`, a number a double cannot carry to the same decimal value
//   (an integer past 64 bits, a 17-digit amount): written out again it would change.
// On failure, problem() says where (a JSON path) and why, never the value.
//
// Thread safety: a value type; one instance per parse.
class PayloadJson {
 public:
  static constexpr std::size_t kMaxDepth = 128;

  PayloadJson(std::string_view text, bool exact_numbers);

  bool ok() const { return problem_.empty(); }
  // The JSON path of the fault ("$" for the payload as a whole).
  const std::string& path() const { return path_; }
  // Why it was refused; empty when ok().
  const std::string& problem() const { return problem_; }
  // REQUIRES: ok().
  nlohmann::json& value() { return value_; }

  // True when `text` (a JSON number) and `value` have the same decimal value.
  static bool same_number(std::string_view text, double value);

 private:
  nlohmann::json value_;
  std::string path_ = "$";
  std::string problem_;
};

}  // namespace outbox
