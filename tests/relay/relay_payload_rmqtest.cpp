// Payloads are opaque bytes: every byte value and every size up to the producer's
// limit arrives unchanged, whether it came with the claim or was fetched apart.
#include <doctest/doctest.h>

#include <map>
#include <pqxx/pqxx>
#include <random>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::TestBroker;

namespace {

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

}  // namespace

TEST_CASE("payloads of every byte value and of every size arrive byte for byte, small and large in one batch") {
  ScopedSchema schema;
  TestBroker broker;
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  // Around the claim's inline limit (OutboxStatements::kInlinePayloadBytes, 2 KiB: larger
  // ones are fetched apart, in binary), and well past it; some of them in escape form
  // (backslashes, octal), some printable, some empty.
  const std::vector<std::string> payloads = {
      every_byte,
      "",
      R"({"path":"C:\\temp\\x","quote":"\"","nul":"\u0000"})",
      std::string(2 * 1024, 'k'),
      random_bytes(2 * 1024 + 1, 3),
      std::string(16 * 1024, 'j'),
      random_bytes(16 * 1024 + 1, 1),
      random_bytes(300 * 1024, 2),
      std::string(1024 * 1024, '\\'),  // the producer's limit, every byte escaped
      every_byte + every_byte,
  };
  std::map<std::string, std::string> sent;  // message id -> payload
  {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    for (const auto& p : payloads) {
      Message m;
      m.exchange = Exchange(broker.exchange());
      m.routing_key = RoutingKey(broker.routing_key());
      m.type = MessageType("Blob");
      m.content_type = "application/octet-stream";
      m.payload = p;
      sent[writer.enqueue(tx, m).to_string()] = p;
    }
    tx.commit();
  }
  RelayProcess relay(testenv::relay_config_yaml(schema.name()), /*exit_when_idle=*/true);
  REQUIRE(relay.wait() == 0);
  auto got = broker.receive(payloads.size() + 1, std::chrono::milliseconds(3000));
  REQUIRE(got.size() == payloads.size());
  for (const auto& m : got) {
    INFO("message " << m.message_id << ", " << m.body.size() << " bytes");
    REQUIRE(sent.count(m.message_id) == 1);
    CHECK(m.body.size() == sent[m.message_id].size());
    CHECK(m.body == sent[m.message_id]);
  }
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "0");
}

TEST_CASE("a payload over relay.max_payload_bytes is not fetched: its row is parked naming the key, the rest go out") {
  ScopedSchema schema;
  TestBroker broker;
  const std::size_t limit = 64 * 1024;
  std::map<std::string, std::string> sent;  // message id -> payload
  std::string too_big_id;
  {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    auto enqueue = [&](const std::string& payload) {
      Message m;
      m.exchange = Exchange(broker.exchange());
      m.routing_key = RoutingKey(broker.routing_key());
      m.type = MessageType("Blob");
      m.payload = payload;
      return writer.enqueue(tx, m).to_string();
    };
    sent[enqueue("small before")] = "small before";
    sent[enqueue(random_bytes(limit, 4))] = random_bytes(limit, 4);  // at the limit: sent
    too_big_id = enqueue(random_bytes(limit + 1, 5));
    sent[enqueue("small after")] = "small after";
    tx.commit();
  }
  RelayProcess relay(testenv::relay_config_yaml(schema.name(), "  max_attempts: 1\n  max_payload_bytes: 65536\n"),
                     /*exit_when_idle=*/true);
  REQUIRE(relay.wait() == 0);
  auto got = broker.receive(sent.size() + 1, std::chrono::milliseconds(3000));
  REQUIRE(got.size() == sent.size());
  for (const auto& m : got) {
    REQUIRE(sent.count(m.message_id) == 1);
    CHECK(m.body == sent[m.message_id]);
  }
  const std::string table = "\"" + schema.name() + "\".outbox";
  CHECK(testenv::sql_value("SELECT parked_at IS NOT NULL FROM " + table + " WHERE message_id = '" + too_big_id + "'") ==
        "t");
  CHECK(testenv::sql_value("SELECT last_error FROM " + table + " WHERE message_id = '" + too_big_id + "'") ==
        "column payload: 65537 bytes, above relay.max_payload_bytes (65536): not fetched");
}
