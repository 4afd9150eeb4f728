#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Error types of the outbox SDKs.

#include <stdexcept>
#include <string>

#include "outbox/error_text.h"
#include "outbox/one_line.h"

namespace outbox {

// Bad input from the caller (a message, a name, a setting). Thrown before anything
// is written; the message names the field and the offending value, never a secret
// or a payload. Retrying the same input fails the same way. Call sites quote values
// with quoted_value(); the message is kept on one line whatever it holds
// (one_line), so logging what() cannot split or forge a log line.
class ValidationError : public std::invalid_argument {
 public:
  ValidationError(const std::string& field, const std::string& what)
      : std::invalid_argument(one_line(field + ": " + what)), field_(one_line(field)), detail_(one_line(what)) {}
  const std::string& field() const { return field_; }
  // The message without the field name.
  const std::string& detail() const { return detail_; }

 private:
  std::string field_;
  std::string detail_;
};

// A failure that retrying cannot fix (a payload that fails to decrypt, a message
// that breaks its event schema). Consumers reject such a message to the dead-letter
// exchange at once instead of redelivering it.
class PermanentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace outbox
