// A relay whose PostgreSQL server is read-only (a demoted primary after a failover,
// a standby reached by a DSN without target_session_attrs=read-write) drops that
// session and connects again, so libpq can find the primary; nothing is charged to
// the rows and the retries back off. The failover itself (a standby promoted, a
// multi-host DSN) runs in the cluster chaos test (docs/CHAOS.md, cluster mode).
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;

namespace {

int lines_with(const std::string& log, const std::string& needle) {
  int n = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("a read-only server's session is dropped and reopened, with backoff and no attempt charged") {
  testenv::ScopedSchema schema;
  testenv::TestBroker broker;
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    for (int i = 0; i < 3; ++i) {
      Message m;
      m.exchange = Exchange(broker.exchange());
      m.routing_key = RoutingKey(broker.routing_key());
      m.type = MessageType("ReadOnly");
      m.payload = "{}";
      writer.enqueue(tx, m);
    }
    tx.commit();
  }
  const std::string dsn = testenv::pg_dsn();
  REQUIRE_MESSAGE(dsn.rfind("postgres", 0) != 0, "the test appends a keyword to a keyword-form OUTBOX_PG_DSN");
  // Every session of this relay is read-only, as on a standby: the claim's UPDATE fails with 25006.
  std::string yaml = testenv::relay_config_yaml(schema.name());
  const std::string from = "dsn: ${OUTBOX_PG_DSN}";
  yaml.replace(yaml.find(from), from.size(), from + " options='-c default_transaction_read_only=on'");
  testenv::RelayProcess relay(yaml);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(4s);
  const std::string log = relay.log();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int refused = lines_with(log, "SQLSTATE 25006");
  CHECK_MESSAGE(refused >= 2, log);
  CHECK_MESSAGE(lines_with(log, "connected to PostgreSQL") >= 2, log);  // the session was reopened
  // Backing off, not spinning: at 50 ms polls a spin would log about 20 per second.
  CHECK_MESSAGE(refused < 5 * seconds, log);
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() +
                           "\".outbox WHERE attempts > 0 OR parked_at IS NOT NULL OR published_at IS NOT NULL") == "0");
  CHECK(relay.running());
}
