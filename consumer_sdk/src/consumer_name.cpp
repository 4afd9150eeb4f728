#include "outbox/consumer_name.h"

#include "outbox/errors.h"

namespace outbox {

void validate_consumer_name(const ConsumerName& name, const std::string& field) {
  const std::string& v = name.value();
  bool ok = !v.empty() && v.size() <= 200;
  for (char c : v)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == ':' || c == '-');
  if (!ok) {
    std::string shown = v.size() > 80 ? v.substr(0, 80) + "..." : v;
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    throw ValidationError(field, "'" + shown + "' is not a consumer name (1-200 of [A-Za-z0-9_.:-])");
  }
}

}  // namespace outbox
