#include "publish/pg_connect.h"

#include "outbox/pg_connection.h"
#include "publish/outbox_store.h"

namespace relay {

std::unique_ptr<pqxx::connection> connect_postgres(const PostgresConfig& config) {
  return outbox::open_pg_connection(dsn_with_session_options(config));
}

}  // namespace relay
