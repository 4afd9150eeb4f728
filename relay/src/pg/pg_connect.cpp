#include "publish/pg_connect.h"

#include "config/preflight.h"
#include "outbox/pg_connection.h"
#include "publish/outbox_store.h"

namespace relay {

std::unique_ptr<pqxx::connection> connect_postgres(const PostgresConfig& config) {
  auto conn = outbox::open_pg_connection(dsn_with_session_options(config));
  // Every session, the loop's reconnects included: a DSN (or PGHOST) listing a Unix
  // socket after a TCP host reaches the socket, where libpq's sslmode does not
  // apply, once the TCP host is down.
  require_tls_session(*conn, config);
  return conn;
}

}  // namespace relay
