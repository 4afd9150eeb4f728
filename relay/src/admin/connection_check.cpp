#include "admin/connection_check.h"

#include <pqxx/pqxx>

#include "publish/amqp_publisher.h"
#include "outbox/one_line.h"
#include "publish/outbox_store.h"
#include "publish/pg_connect.h"
#include "config/preflight.h"

namespace relay {

bool check_connections(const RelayConfig& config, std::ostream& out) {
  bool ok = true;
  try {
    auto conn_owner = connect_postgres(config.postgres);
    auto& conn = *conn_owner;
    preflight(conn, config);
    const char* host = conn.hostname();
    out << "postgres: ok (" << (host ? host : "?") << ":" << conn.port() << "/" << conn.dbname()
        << ", schema '" << config.postgres.schema << "' migrated, privileges sufficient)\n";
  } catch (const std::exception& e) {
    out << "postgres: FAILED: " << outbox::one_line(e.what()) << "\n";
    ok = false;
  }
  try {
    AmqpPublisher amqp(config.amqp);
    amqp.connect();
    out << "amqp: ok (" << amqp.endpoint() << ", confirm channel open";
    if (!config.amqp.alternate_exchange.empty())
      out << ", alternate exchange '" << outbox::one_line(config.amqp.alternate_exchange, 80) << "' exists";
    out << ")\n";
  } catch (const std::exception& e) {
    out << "amqp: FAILED: " << outbox::one_line(e.what()) << "\n";
    ok = false;
  }
  return ok;
}

}  // namespace relay
