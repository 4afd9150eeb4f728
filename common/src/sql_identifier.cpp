#include "outbox/sql_identifier.h"

#include "outbox/error_text.h"
#include "outbox/errors.h"

namespace outbox {

std::string quoted_identifier(const std::string& name, const std::string& field) {
  bool ok = !name.empty() && name.size() <= 63 && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    throw ValidationError(field, quoted_value(name, 80) +
                                     " is not a plain identifier ([a-z_][a-z0-9_]*, "
                                     "at most 63 characters)");
  }
  return "\"" + name + "\"";
}

}  // namespace outbox
