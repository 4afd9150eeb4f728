// The relay's statements stay index scans however the outbox grew since it started.
// Their plans are prepared once and cached; a plan made while the table was small
// was a sequential scan, and without enable_seqscan = off it stayed one as the table
// grew, so every batch read the whole table and a relay at 5 000 msg/s fell behind
// for good (docs/perf/NOTEBOOK.md, "Round three").
#include <doctest/doctest.h>

#include <csignal>
#include <pqxx/pqxx>
#include <thread>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

std::string table(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox"; }

// Enqueues one message and waits until the relay marked it published.
void publish_one(const ScopedSchema& schema, const TestBroker& broker, const RelayProcess& relay) {
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  Message m;
  m.exchange = Exchange(broker.exchange());
  m.routing_key = RoutingKey(broker.routing_key());
  m.type = MessageType("PlanProbe");
  m.payload = "{}";
  const auto id = writer.enqueue(tx, m);
  tx.commit();
  // By its unique message id: an index lookup in this session whatever the statistics.
  REQUIRE_MESSAGE(testenv::eventually(10s,
                                      [&] {
                                        return sql_value("SELECT published_at IS NOT NULL FROM " + table(schema) +
                                                         " WHERE message_id = '" + id.to_string() + "'") == "t";
                                      }),
                  relay.log());
}

// Sequential scans of the outbox so far, by every session (flushed statistics).
long long seq_scans(const ScopedSchema& schema) {
  return std::stoll(sql_value("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = '" + table(schema) +
                              "'::regclass"));
}

}  // namespace

TEST_CASE("a relay started on a small outbox never scans it whole once it has grown") {
  ScopedSchema schema;
  TestBroker broker;
  // Statistics of a tiny table: a plan made now prefers a sequential scan.
  sql_exec("ANALYZE " + table(schema));
  RelayProcess relay(testenv::relay_config_yaml(schema.name()));
  // More than 5 executions of each statement: PostgreSQL then caches a generic plan.
  for (int i = 0; i < 8; ++i) publish_one(schema, broker, relay);

  // 100 000 rows of history, written by hand (relay state set: the row checks exempt them).
  sql_exec("INSERT INTO " + table(schema) +
           " (exchange, routing_key, message_type, payload, published_at) "
           "SELECT 'x', 'rk', 'History', '\\x7b7d', now() FROM generate_series(1, 100000)");
  // Statistics are flushed by each backend within about a second of going idle.
  std::this_thread::sleep_for(1500ms);
  const long long before = seq_scans(schema);

  for (int i = 0; i < 12; ++i) publish_one(schema, broker, relay);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  std::this_thread::sleep_for(1500ms);  // the relay's backends flush theirs as they exit
  CHECK_MESSAGE(seq_scans(schema) == before, relay.log());
  CHECK(broker.receive(20, 2s).size() == 20);
}
