// What the relay sends and keeps, as configured: relay.on_publish (mark or delete at
// ack), amqp.send_row_id / send_sequence / send_type / send_timestamp, and amqp.alternate_exchange
// in place of `mandatory`. Real relay binary, real PostgreSQL and RabbitMQ.
#include <doctest/doctest.h>

#include <csignal>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <thread>
#include <vector>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

Message event(const std::string& exchange, const std::string& routing_key, int n) {
  Message m;
  m.exchange = Exchange(exchange);
  m.routing_key = RoutingKey(routing_key);
  m.type = MessageType("OrderPlaced");
  m.payload = R"({"order_id":)" + std::to_string(n) + "}";
  m.headers["tenant"] = "acme";
  return m;
}

// The test config with `amqp_extra` lines added to the amqp section.
std::string yaml_with(const ScopedSchema& schema, const std::string& amqp_extra, const std::string& relay_extra = "") {
  std::string y = testenv::relay_config_yaml(schema.name(), relay_extra);
  const std::string anchor = "  confirm_timeout_ms: 10000\n";
  return y.replace(y.find(anchor), anchor.size(), anchor + amqp_extra);
}

std::set<std::string> enqueue(const ScopedSchema& schema, const std::string& exchange, const std::string& rk,
                              int count) {
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  std::set<std::string> ids;
  for (int i = 0; i < count; ++i) ids.insert(writer.enqueue(tx, event(exchange, rk, i)).to_string());
  tx.commit();
  return ids;
}

std::string table(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox"; }

int drain(const std::string& yaml) {
  RelayProcess relay(yaml, /*exit_when_idle=*/true);
  const int code = relay.wait();
  if (code != 0) MESSAGE(relay.log());
  return code;
}

}  // namespace

TEST_CASE("on_publish delete removes each row once its message is acked, and keeps a refused row with its attempt") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  const auto ids = enqueue(schema, broker.exchange(), broker.routing_key(), 40);
  // The broker refuses this one (no such exchange): it must not be deleted.
  enqueue(schema, testenv::unique_name("wire_missing_x"), "rk", 1);
  REQUIRE(drain(yaml_with(schema, "", "  on_publish: delete\n  max_attempts: 1\n")) == 0);

  // Rows in flight when the broker closed the channel for the refused row are
  // published again (at-least-once), so copies may arrive; every row arrives.
  auto got = broker.receive(1000, std::chrono::milliseconds(1500));
  std::set<std::string> received;
  for (const auto& m : got) received.insert(m.message_id);
  CHECK(received == ids);
  // Only the refused row is left, parked with its cause; no published row remains.
  CHECK(sql_value("SELECT count(*) FROM " + table(schema)) == "1");
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE parked_at IS NOT NULL AND attempts = 1") == "1");
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL") == "0");
}

TEST_CASE("on_publish mark (the default) keeps published rows") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  enqueue(schema, broker.exchange(), broker.routing_key(), 10);
  REQUIRE(drain(yaml_with(schema, "")) == 0);
  CHECK(broker.receive(10, std::chrono::milliseconds(1500)).size() == 10);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL") == "10");
}

TEST_CASE("send_row_id, send_type and send_timestamp false leave those out and keep the contract") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  const auto ids = enqueue(schema, broker.exchange(), broker.routing_key(), 5);
  REQUIRE(drain(yaml_with(schema, "  send_row_id: false\n  send_type: false\n  send_timestamp: false\n")) == 0);
  auto got = broker.receive(5, std::chrono::milliseconds(1500));
  REQUIRE(got.size() == 5);
  for (const auto& m : got) {
    CHECK(ids.count(m.message_id) == 1);
    CHECK(m.content_type == "application/json");
    CHECK(m.persistent);
    CHECK(m.headers.at("tenant") == "acme");
    CHECK(m.headers.count("x-outbox-id") == 0);
    CHECK(m.type.empty());
    CHECK(m.timestamp == 0);
  }
}

TEST_CASE("a keyed row carries its key and sequence number; send_sequence false leaves both out") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  for (int i = 0; i < 6; ++i) {
    pqxx::work tx(conn);
    auto m = event(broker.exchange(), broker.routing_key(), i);
    m.ordering_key = i == 5 ? "" : (i % 2 ? "order-b" : "order-a");
    writer.enqueue(tx, m);
    tx.commit();
  }
  REQUIRE(drain(yaml_with(schema, "")) == 0);
  std::map<std::string, std::vector<std::string>> seq_by_key;
  int unkeyed = 0;
  for (const auto& m : broker.receive(6, std::chrono::milliseconds(1500))) {
    if (m.headers.count("x-outbox-key") == 0) {
      ++unkeyed;
      CHECK(m.headers.count("x-outbox-seq") == 0);
      continue;
    }
    seq_by_key[m.headers.at("x-outbox-key")].push_back(m.headers.at("x-outbox-seq"));
  }
  CHECK(unkeyed == 1);
  CHECK(seq_by_key["order-a"] == std::vector<std::string>{"1", "2", "3"});
  CHECK(seq_by_key["order-b"] == std::vector<std::string>{"1", "2"});

  testenv::sql_exec("UPDATE " + table(schema) + " SET published_at = NULL");  // publish them all again
  REQUIRE(drain(yaml_with(schema, "  send_sequence: false\n")) == 0);
  auto again = broker.receive(6, std::chrono::milliseconds(1500));
  CHECK(again.size() == 6);
  for (const auto& m : again) {
    CHECK(m.headers.count("x-outbox-key") == 0);
    CHECK(m.headers.count("x-outbox-seq") == 0);
    CHECK(m.headers.count("x-outbox-id") == 1);
  }
}

// A row written by hand with a created_at before 1970: the timestamp property
// cannot carry it (AMQP's is unsigned), but it is the only thing that cannot.
TEST_CASE("with send_timestamp false a row created before 1970 is published like any other") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  const auto ids = enqueue(schema, broker.exchange(), broker.routing_key(), 3);
  testenv::sql_exec("UPDATE " + table(schema) +
                    " SET created_at = '1960-01-01 00:00:00+00' WHERE id = (SELECT min(id) FROM " + table(schema) +
                    ")");
  REQUIRE(drain(yaml_with(schema, "  send_timestamp: false\n", "  max_attempts: 1\n")) == 0);
  std::set<std::string> got;
  for (const auto& m : broker.receive(3, std::chrono::milliseconds(1500))) {
    got.insert(m.message_id);
    CHECK(m.timestamp == 0);
  }
  CHECK(got == ids);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) +
                  " WHERE published_at IS NOT NULL AND attempts = 0 AND last_error IS NULL") == "3");
}

TEST_CASE("with send_timestamp a row created before 1970 fails on its own, naming created_at and its value") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  auto ids = enqueue(schema, broker.exchange(), broker.routing_key(), 3);
  const auto early = sql_value("UPDATE " + table(schema) +
                               " SET created_at = '1960-01-01 00:00:00+00' WHERE id = "
                               "(SELECT min(id) FROM " +
                               table(schema) + ") RETURNING message_id::text");
  ids.erase(early);
  REQUIRE(drain(yaml_with(schema, "", "  max_attempts: 1\n")) == 0);
  std::set<std::string> got;
  for (const auto& m : broker.receive(3, std::chrono::milliseconds(1500))) {
    got.insert(m.message_id);
    CHECK(m.timestamp > 0);
  }
  CHECK(got == ids);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL") == "2");
  const auto error = sql_value("SELECT last_error FROM " + table(schema) +
                               " WHERE parked_at IS NOT NULL AND attempts = 1");
  CHECK_MESSAGE(error.find("created_at: 1960-01-01 00:00:00+00 (-315619200 s since 1970) is before 1970") !=
                    std::string::npos,
                error);
}

TEST_CASE("with an alternate exchange, an unroutable message goes there and its row is published, not charged") {
  ScopedSchema schema("wire");
  TestBroker lost("wire_ae", "nowhere");
  TestBroker broker("wire", "rk", lost.exchange());
  const auto routed = enqueue(schema, broker.exchange(), "rk", 5);
  const auto unroutable = enqueue(schema, broker.exchange(), "nowhere", 3);
  REQUIRE(drain(yaml_with(schema, "  alternate_exchange: " + lost.exchange() + "\n")) == 0);

  std::set<std::string> got, got_lost;
  for (const auto& m : broker.receive(5, std::chrono::milliseconds(1500))) got.insert(m.message_id);
  for (const auto& m : lost.receive(3, std::chrono::milliseconds(1500))) got_lost.insert(m.message_id);
  CHECK(got == routed);
  CHECK(got_lost == unroutable);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL AND attempts = 0") == "8");
}

TEST_CASE("a missing alternate exchange is named by check-config --connect, and the relay publishes nothing") {
  ScopedSchema schema("wire");
  TestBroker broker("wire");
  enqueue(schema, broker.exchange(), broker.routing_key(), 3);
  const std::string missing = testenv::unique_name("wire_no_ae");
  const auto yaml = yaml_with(schema, "  alternate_exchange: " + missing + "\n");

  auto check = testenv::run_relay_command({"check-config", "--connect", testenv::write_temp_file(yaml)});
  CHECK(check.exit_code != 0);
  CHECK(check.output.find("amqp.alternate_exchange") != std::string::npos);
  CHECK(check.output.find(missing) != std::string::npos);

  RelayProcess relay(yaml);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(relay.running());
  CHECK(broker.receive(3, std::chrono::milliseconds(300)).empty());
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL AND attempts = 0") == "3");
  relay.signal(SIGTERM);
  relay.wait();
  CHECK(relay.log().find("amqp.alternate_exchange") != std::string::npos);
}
