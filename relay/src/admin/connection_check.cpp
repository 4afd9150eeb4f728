#include "admin/connection_check.h"

#include <pqxx/pqxx>

#include "broker/amqp_publisher.h"
#include "config/preflight.h"
#include "outbox/one_line.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

// One login and a confirm-mode channel on the (first) endpoint of `amqp`.
bool check_amqp(const AmqpConfig& amqp, const std::string& label, std::ostream& out) {
  try {
    AmqpPublisher publisher(amqp);
    publisher.connect();
    out << label << ": ok (" << publisher.endpoint() << ", confirm channel open";
    if (!amqp.alternate_exchange.empty())
      out << ", alternate exchange '" << outbox::one_line(amqp.alternate_exchange, 80) << "' exists";
    out << ")\n";
    return true;
  } catch (const std::exception& e) {
    out << label << ": FAILED: " << outbox::one_line(e.what()) << "\n";
    return false;
  }
}

}  // namespace

bool check_connections(const RelayConfig& config, std::ostream& out) {
  bool ok = true;
  try {
    auto conn_owner = connect_postgres(config.postgres);
    auto& conn = *conn_owner;
    preflight(conn, config);
    const char* host = conn.hostname();
    out << "postgres: ok (" << (host ? host : "?") << ":" << conn.port() << "/" << conn.dbname() << ", schema '"
        << config.postgres.schema << "' migrated, privileges sufficient)\n";
  } catch (const std::exception& e) {
    out << "postgres: FAILED: " << outbox::one_line(e.what()) << "\n";
    ok = false;
  }
  if (config.amqp.uris.empty()) return check_amqp(config.amqp, "amqp", out) && ok;
  // Every node of the list once, in the order written; the relay can run while
  // at least one of them takes it.
  int reachable = 0;
  for (std::size_t i = 0; i < config.amqp.uris.size(); ++i) {
    AmqpConfig one = config.amqp;
    one.uri = config.amqp.uris[i];
    one.uris = {one.uri};  // errors then name amqp.uris[0]: the index is in the label instead
    reachable += check_amqp(one, "amqp.uris[" + std::to_string(i) + "]", out) ? 1 : 0;
  }
  out << "amqp: " << reachable << " of " << config.amqp.uris.size() << " nodes reachable\n";
  return ok && reachable > 0;
}

}  // namespace relay
