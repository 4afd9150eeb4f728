#include "pg/session_options.h"

#include "outbox/pg_conninfo.h"

namespace relay {

std::string dsn_with_session_options(const PostgresConfig& c) {
  const std::string options[][2] = {
      {"application_name", "outbox-relay"},
      {"connect_timeout", std::to_string(c.connect_timeout_s)},
      {"keepalives", "1"},
      {"keepalives_idle", std::to_string(c.keepalives_idle_s)},
      {"keepalives_interval", "5"},
      {"keepalives_count", "3"},
      {"tcp_user_timeout", std::to_string(c.tcp_user_timeout_ms)},
  };
  // Rebuilt from libpq's own parse: what the configuration checked is what libpq
  // gets, and no value can be mistaken for a keyword.
  auto info = outbox::PgConnInfo::parse(c.dsn);
  for (const auto& [key, value] : options) info.set_default(key, value);  // the user's choice wins
  // Pinned, so that neither PGSSLMODE nor a service file can weaken it.
  if (c.require_tls) info.set("sslmode", "verify-full");
  return info.to_string();
}

}  // namespace relay
