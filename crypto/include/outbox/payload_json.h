#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// PayloadJson: parses an event payload that will be written out again.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace outbox {

// Parses payload text for code that changes fields and serialises the payload again
// (the encryptor, the decryptor), refusing what that would damage or crash on:
// - nesting deeper than kMaxDepth: nlohmann::json copies and dumps recursively, so
//   an 80 KB `[[[[…]]]]` would overflow the stack;
// - with `exact_numbers`, a number a double cannot carry to the same decimal value
//   (an integer past 64 bits, a 17-digit amount): written out again it would change.
// On failure, problem() says why and path() where (a JSON path), never the value.
// The path holds the payload's own keys: a caller that knows which values are
// sensitive names less (EventSchema::error_path).
//
// Thread safety: a value type; one instance per parse.
class PayloadJson {
 public:
  static constexpr std::size_t kMaxDepth = 128;

  // One step of the path: an array index, or an object key.
  struct Step {
    explicit Step(bool is_array) : array(is_array) {}
    bool array;
    long index = -1;
    std::string key;
  };

  PayloadJson(std::string_view text, bool exact_numbers);

  bool ok() const { return problem_.empty(); }
  // The JSON path of the fault ("$" for the payload as a whole).
  const std::string& path() const { return path_; }
  // The same path as steps from the root (none for "$").
  const std::vector<Step>& steps() const { return steps_; }
  // Why it was refused; empty when ok().
  const std::string& problem() const { return problem_; }
  // REQUIRES: ok().
  nlohmann::json& value() { return value_; }

  // True when `text` (a JSON number) and `value` have the same decimal value.
  static bool same_number(std::string_view text, double value);

 private:
  nlohmann::json value_;
  std::string path_ = "$";
  std::vector<Step> steps_;
  std::string problem_;
};

}  // namespace outbox
