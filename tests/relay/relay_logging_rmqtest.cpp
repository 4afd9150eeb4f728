// The relay's log with log.format: json: one JSON object per line, and neither
// secrets nor payloads in it, even when publishing fails.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <sstream>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;

TEST_CASE("with log.format json every line is one JSON object and no password or payload is logged") {
  testenv::ScopedSchema schema;
  const std::string marker = "payload-marker-5f1c";
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    Message m;
    m.exchange = Exchange(testenv::unique_name("missing_exchange"));  // 404: channel closed
    m.routing_key = RoutingKey("rk");
    m.type = MessageType("OrderPlaced");
    m.payload = R"({"card":")" + marker + "\"}";
    writer.enqueue(tx, m);
    tx.commit();
  }
  auto yaml = testenv::relay_config_yaml(schema.name(), "  max_attempts: 1\n");
  const std::string pg_secret = "pg-secret-8c2e";  // the test server trusts loopback: unused, but present
  yaml.replace(yaml.find("${OUTBOX_PG_DSN}"), 16, "${OUTBOX_PG_DSN} password=" + pg_secret);
  yaml.replace(yaml.find("level: debug"), 12, "level: debug\n  format: json");
  testenv::RelayProcess relay(yaml, /*exit_when_idle=*/true);
  CHECK(relay.wait() == 0);
  const auto log = relay.log();

  std::istringstream lines(log);
  std::string line;
  std::set<std::string> levels;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(line));
    CHECK(j.is_object());
    CHECK(j["time"].is_string());
    CHECK(j["pid"].is_number_integer());
    CHECK(j["msg"].is_string());
    levels.insert(j["level"].get<std::string>());
  }
  CHECK(n >= 4);
  CHECK(levels.count("warning") == 1);  // the parked row and the closed channel
  CHECK(log.find("parked after 1 attempts") != std::string::npos);
  CHECK(log.find(marker) == std::string::npos);
  CHECK(log.find(pg_secret) == std::string::npos);
  CHECK(log.find("guest:guest") == std::string::npos);
}

TEST_CASE("a parked row's JSON log lines carry row_id, message_id, attempt and reason as fields") {
  testenv::ScopedSchema schema;
  const std::string missing = testenv::unique_name("missing_exchange");
  std::string message_id;
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    Message m;
    m.exchange = Exchange(missing);  // 404: the broker closes the channel over this row
    m.routing_key = RoutingKey("rk");
    m.type = MessageType("OrderPlaced");
    m.payload = R"({"n":1})";
    message_id = writer.enqueue(tx, m).to_string();
    tx.commit();
  }
  const auto row_id = std::stoll(testenv::sql_value("SELECT id FROM \"" + schema.name() + "\".outbox"));
  auto yaml = testenv::relay_config_yaml(schema.name(), "  max_attempts: 1\n");
  yaml.replace(yaml.find("level: debug"), 12, "level: info\n  format: json");
  testenv::RelayProcess relay(yaml, /*exit_when_idle=*/true);
  CHECK(relay.wait() == 0);

  std::vector<nlohmann::json> about_row;
  std::istringstream lines(relay.log());
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("row_id")) about_row.push_back(j);
  }
  REQUIRE_MESSAGE(about_row.size() == 2, relay.log());  // charged with its attempt, then parked
  for (const auto& j : about_row) {
    CHECK(j["row_id"] == row_id);
    CHECK(j["message_id"] == message_id);
    CHECK(j["reason"].get<std::string>().find("404") != std::string::npos);
    CHECK(j["reason"].get<std::string>().find(missing) != std::string::npos);
    CHECK(j["msg"].get<std::string>().find("row " + std::to_string(row_id)) != std::string::npos);
  }
  for (const auto& j : about_row) {
    CHECK(j["level"] == "warning");
    CHECK(j["attempt"] == 1);
  }
  CHECK(about_row.front()["msg"].get<std::string>().find("is charged an attempt") != std::string::npos);
  CHECK(about_row.back()["msg"].get<std::string>().find("parked after 1 attempts") != std::string::npos);
}
