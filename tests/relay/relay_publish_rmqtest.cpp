// The relay against real PostgreSQL and RabbitMQ: what arrives, and what stays pending.
#include <doctest/doctest.h>

#include <csignal>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

Message event_for(const TestBroker& broker, int n) {
  Message m;
  m.exchange = Exchange(broker.exchange());
  m.routing_key = RoutingKey(broker.routing_key());
  m.type = MessageType("OrderPlaced");
  m.ordering_key = "order-" + std::to_string(n);
  m.payload = R"({"order_id":)" + std::to_string(n) + "}";
  m.headers["tenant"] = "acme";
  m.correlation_id = "req-" + std::to_string(n);
  return m;
}

std::string outbox_of(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox"; }

int drain(const ScopedSchema& schema, const std::string& extra_relay = "") {
  RelayProcess relay(testenv::relay_config_yaml(schema.name(), extra_relay), /*exit_when_idle=*/true);
  int code = relay.wait();
  if (code != 0) MESSAGE(relay.log());
  return code;
}

}  // namespace

TEST_CASE("N committed enqueues arrive as exactly N messages with their ids, bodies and properties") {
  ScopedSchema schema;
  TestBroker broker;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  std::map<std::string, int> sent;  // message id -> order number
  for (int i = 0; i < 50; ++i) {
    pqxx::work tx(conn);
    sent[writer.enqueue(tx, event_for(broker, i)).to_string()] = i;
    tx.commit();
  }
  {
    pqxx::work tx(conn);  // rolled back: must never be published
    writer.enqueue(tx, event_for(broker, 999));
    tx.abort();
  }
  REQUIRE(drain(schema) == 0);

  auto got = broker.receive(51, std::chrono::milliseconds(1500));
  CHECK(got.size() == 50);
  std::set<std::string> ids;
  for (const auto& m : got) {
    REQUIRE(sent.count(m.message_id) == 1);
    int n = sent[m.message_id];
    ids.insert(m.message_id);
    CHECK(m.body == R"({"order_id":)" + std::to_string(n) + "}");
    CHECK(m.type == "OrderPlaced");
    CHECK(m.content_type == "application/json");
    CHECK(m.correlation_id == "req-" + std::to_string(n));
    CHECK(m.persistent);
    CHECK(m.timestamp > 0);
    CHECK(m.headers.at("tenant") == "acme");
    CHECK(m.headers.count("x-outbox-id") == 1);
  }
  CHECK(ids.size() == 50);
  CHECK(sql_value("SELECT count(*) FROM " + outbox_of(schema) + " WHERE published_at IS NOT NULL") == "50");
}

TEST_CASE("an unroutable message stays pending with the return as its last error") {
  ScopedSchema schema;
  TestBroker broker;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto routed = writer.enqueue(tx, event_for(broker, 1));
  auto m = event_for(broker, 2);
  m.routing_key = RoutingKey("no.binding.here");
  auto unroutable = writer.enqueue(tx, m);
  tx.commit();
  // A backoff long enough that "next attempt in the future" holds however slowly a
  // loaded machine gets from the relay's exit to the check.
  REQUIRE(drain(schema, "  backoff_initial_ms: 60000\n  backoff_max_ms: 60000\n") == 0);

  auto row = [&](const MessageId& id, const std::string& column) {
    return sql_value("SELECT " + column + " FROM " + outbox_of(schema) + " WHERE message_id = '" + id.to_string() +
                     "'");
  };
  CHECK(row(routed, "published_at IS NOT NULL") == "t");
  CHECK(row(unroutable, "published_at IS NULL") == "t");
  CHECK(row(unroutable, "attempts") == "1");
  CHECK(row(unroutable, "next_attempt_at > now()") == "t");
  CHECK(row(unroutable, "last_error").find("312 NO_ROUTE") != std::string::npos);
  CHECK(broker.receive(2, std::chrono::milliseconds(500)).size() == 1);
}

TEST_CASE("a missing exchange closes the channel: that row stays pending, the others get through") {
  ScopedSchema schema;
  TestBroker broker;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (int i = 0; i < 3; ++i) writer.enqueue(tx, event_for(broker, i));
  auto m = event_for(broker, 3);
  m.exchange = Exchange(testenv::unique_name("missing_x"));
  auto lost = writer.enqueue(tx, m);
  for (int i = 4; i < 8; ++i) writer.enqueue(tx, event_for(broker, i));
  tx.commit();
  REQUIRE(drain(schema) == 0);

  CHECK(sql_value("SELECT count(*) FROM " + outbox_of(schema) + " WHERE published_at IS NOT NULL") == "7");
  auto error = sql_value("SELECT last_error FROM " + outbox_of(schema) + " WHERE message_id = '" + lost.to_string() +
                         "'");
  CHECK(error.find("404") != std::string::npos);
  CHECK(sql_value("SELECT attempts FROM " + outbox_of(schema) + " WHERE message_id = '" + lost.to_string() + "'") ==
        "1");
  // Rows that were routed but whose acks died with the channel are published again:
  // duplicates are allowed (at-least-once), a missing message is not.
  std::set<std::string> distinct;
  for (const auto& r : broker.receive(100, std::chrono::milliseconds(500))) distinct.insert(r.message_id);
  CHECK(distinct.size() == 7);
  CHECK(distinct.count(lost.to_string()) == 0);
}

TEST_CASE("a row that keeps failing is parked after max_attempts and never claimed again") {
  ScopedSchema schema;
  TestBroker broker;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto m = event_for(broker, 1);
  m.routing_key = RoutingKey("unbound");
  writer.enqueue(tx, m);
  tx.commit();
  RelayProcess relay(testenv::relay_config_yaml(schema.name(),
                                                "  max_attempts: 3\n  backoff_initial_ms: 10\n  backoff_max_ms: 20\n"));
  testenv::eventually(std::chrono::seconds(10), [&] {
    return sql_value("SELECT count(*) FROM " + outbox_of(schema) + " WHERE parked_at IS NOT NULL") == "1";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  CHECK(sql_value("SELECT attempts FROM " + outbox_of(schema)) == "3");
  CHECK(sql_value("SELECT parked_at IS NOT NULL AND published_at IS NULL FROM " + outbox_of(schema)) == "t");
}
