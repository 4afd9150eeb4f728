#include "session_limits.h"

#include <algorithm>

namespace outbox::detail {

void set_session_limits(PgConnInfo& info, const std::string& name, std::chrono::milliseconds timeout) {
  info.set_default("application_name", name);
  info.set_default("connect_timeout", std::to_string(std::max<long long>(2, (timeout.count() + 999) / 1000)));
  info.set_default("keepalives", "1");
  info.set_default("keepalives_idle", "10");
  info.set_default("keepalives_interval", "5");
  info.set_default("keepalives_count", "3");
}

}  // namespace outbox::detail
