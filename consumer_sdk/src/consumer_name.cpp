#include "outbox/consumer_name.h"

#include "outbox/error_text.h"
#include "outbox/errors.h"

namespace outbox {

void validate_consumer_name(const ConsumerName& name, const std::string& field) {
  const std::string& v = name.value();
  bool ok = !v.empty() && v.size() <= 200;
  for (char c : v)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                c == ':' || c == '-');
  // Quoted as every SDK error quotes a caller's value, and as the SQL contract's
  // inbox_record() quotes it (outbox_quoted): bidi overrides and C1 controls too.
  if (!ok) throw ValidationError(field, quoted_value(v) + " is not a consumer name (1-200 of [A-Za-z0-9_.:-])");
}

}  // namespace outbox
