#include "pg/pg_connect.h"

#include "config/preflight.h"
#include "outbox/pg_connection.h"
#include "pg/session_options.h"

namespace relay {

// With postgres.require_tls, on every session, the loop's reconnects included: a
// DSN (or PGHOST) listing a Unix socket after a TCP host reaches the socket, where
// libpq's sslmode does not apply, once the TCP host is down.
std::unique_ptr<pqxx::connection> connect_postgres(const PostgresConfig& config) {
  auto conn = outbox::open_pg_connection(dsn_with_session_options(config));
  require_tls_session(*conn, config);
  return conn;
}

std::unique_ptr<PgSession> open_relay_session(const PostgresConfig& config) {
  auto session = std::make_unique<PgSession>(dsn_with_session_options(config));
  if (config.require_tls && !session->ssl_in_use()) throw PreflightError(kNotEncryptedSession);
  return session;
}

}  // namespace relay
