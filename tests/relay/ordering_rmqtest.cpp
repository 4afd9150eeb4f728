// Per-key ordering (relay.ordering: per_key) with several relays on real servers:
// relays killed and started at random never reorder a key, only repeat; a failing
// key holds back only itself; lanes move to a newcomer and from a dead relay in time.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <random>
#include <thread>

#include "outbox/outbox_writer.h"
#include "pg/lane_manager.h"
#include "relay_process.h"
#include "test_env.h"

using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_value;
using testenv::TestBroker;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kLanes = 16;

std::string per_key_yaml(const std::string& schema, const std::string& extra = "") {
  return testenv::relay_config_yaml(schema, "  ordering: per_key\n  lanes: 16\n  rebalance_interval_ms: 300\n" + extra);
}

// keys × events rows; row (key k, sequence s) has body "k:s" and ids in sequence order per key.
void enqueue_keyed(const ScopedSchema& schema, const TestBroker& broker, int keys, int events) {
  testenv::sql_exec("INSERT INTO \"" + schema.name() +
                    "\".outbox "
                    "(message_id, exchange, routing_key, message_type, ordering_key, payload) "
                    "SELECT gen_random_uuid(), '" +
                    broker.exchange() + "', '" + broker.routing_key() +
                    "', 'Step', 'key-' || k, convert_to(k || ':' || s, 'UTF8') "
                    "FROM generate_series(0, " +
                    std::to_string(events - 1) + ") s, generate_series(0, " + std::to_string(keys - 1) +
                    ") k ORDER BY s, k");
}

std::string pending(const ScopedSchema& schema) {
  return sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL");
}

// How many lanes each relay session holds, largest first (from pg_locks).
std::vector<int> lane_holdings(const std::string& schema) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction tx(conn);
  auto r = tx.exec(
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
      "AND classid = " +
      std::to_string(relay::LaneManager(schema, kLanes).lane_class()) + " GROUP BY pid ORDER BY 1 DESC");
  std::vector<int> out;
  for (const auto& row : r) out.push_back(row[0].as<int>());
  return out;
}

// Waits until `done()` or `limit`; returns the time it took (or limit).
template <class Fn>
double seconds_until(Fn done, double limit_s) {
  auto start = Clock::now();
  while (!done()) {
    double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (t > limit_s) return t;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("three relays killed and restarted at random never reorder a key and lose nothing") {
  ScopedSchema schema;
  TestBroker broker;
  const int keys = 200, events = 500;
  enqueue_keyed(schema, broker, keys, events);

  std::vector<std::unique_ptr<RelayProcess>> relays;
  for (int i = 0; i < 3; ++i) relays.push_back(std::make_unique<RelayProcess>(per_key_yaml(schema.name())));
  std::mt19937 rng(12345);
  int kills = 0;
  auto start = Clock::now();
  while (pending(schema) != "0" && Clock::now() - start < std::chrono::minutes(4)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    if (kills < 8) {
      auto& victim = relays[rng() % relays.size()];
      victim->signal(SIGKILL);
      victim->wait();
      victim = std::make_unique<RelayProcess>(per_key_yaml(schema.name()));
      ++kills;
    }
  }
  REQUIRE(pending(schema) == "0");
  for (auto& r : relays) {
    r->signal(SIGTERM);
    CHECK(r->wait() == 0);
  }
  MESSAGE(kills << " relays killed during the drain");

  auto got = broker.receive(static_cast<std::size_t>(keys) * events * 2, std::chrono::milliseconds(3000));
  std::map<int, int> last_seen;           // key -> highest sequence received so far
  std::map<int, std::vector<bool>> seen;  // key -> sequences received
  std::size_t reordered = 0, duplicates = 0;
  for (const auto& m : got) {
    int k = std::stoi(m.body.substr(0, m.body.find(':')));
    int s = std::stoi(m.body.substr(m.body.find(':') + 1));
    auto& flags = seen[k];
    flags.resize(events, false);
    if (flags[s]) ++duplicates;
    flags[s] = true;
    auto it = last_seen.find(k);
    // A redelivery may repeat the latest message of a key, never go back before it.
    if (it != last_seen.end() && s < it->second) ++reordered;
    last_seen[k] = std::max(it == last_seen.end() ? -1 : it->second, s);
  }
  std::size_t missing = 0;
  for (int k = 0; k < keys; ++k)
    for (int s = 0; s < events; ++s)
      missing += (seen[k].size() == static_cast<std::size_t>(events) && seen[k][s]) ? 0 : 1;
  MESSAGE(got.size() << " deliveries, " << duplicates << " duplicates");
  CHECK(reordered == 0);
  CHECK(missing == 0);
}

TEST_CASE("a failing key holds back its own later messages and no one else's, then is parked") {
  ScopedSchema schema;
  TestBroker broker;
  outbox::OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto make = [&](const std::string& key, const std::string& rk) {
    outbox::Message m;
    m.exchange = outbox::Exchange(broker.exchange());
    m.routing_key = outbox::RoutingKey(rk);
    m.type = outbox::MessageType("Step");
    m.ordering_key = key;
    m.payload = key;
    return writer.enqueue(tx, m);
  };
  auto stuck = make("bad", "unbound.route");      // returned by the broker every time
  auto held = make("bad", broker.routing_key());  // routable, but behind the stuck one
  for (int i = 0; i < 20; ++i) make("good-" + std::to_string(i), broker.routing_key());
  tx.commit();

  RelayProcess relay(per_key_yaml(schema.name(),
                                  "  max_attempts: 3\n  backoff_initial_ms: 100\n  backoff_max_ms: 200\n"));
  const std::string t = "\"" + schema.name() + "\".outbox";
  auto parked = [&] {
    return sql_value("SELECT parked_at IS NOT NULL FROM " + t + " WHERE message_id = '" + stuck.to_string() + "'") ==
           "t";
  };
  CHECK(seconds_until(parked, 30) < 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);

  // Every other key went through; the message behind the stuck one was never sent.
  CHECK(sql_value("SELECT count(*) FROM " + t + " WHERE ordering_key LIKE 'good-%' AND published_at IS NOT NULL") ==
        "20");
  CHECK(sql_value("SELECT published_at IS NULL AND attempts = 0 FROM " + t + " WHERE message_id = '" +
                  held.to_string() + "'") == "t");
  CHECK(sql_value("SELECT attempts FROM " + t + " WHERE message_id = '" + stuck.to_string() + "'") == "3");
  // Policy park_key (the default): the key stays blocked behind its parked head.
  auto got = broker.receive(100, std::chrono::milliseconds(500));
  CHECK(got.size() == 20);
  for (const auto& m : got) CHECK(m.body != "bad");
  // The operator sees the blocked key and what waits behind it.
  auto list = testenv::run_relay_command({"dead", "list", "--config",
                                          testenv::write_temp_file(per_key_yaml(schema.name()))});
  CHECK(list.exit_code == 0);
  CHECK(list.output.find("1 key(s) blocked behind a parked message") != std::string::npos);
  CHECK(list.output.find("key bad") != std::string::npos);
  CHECK(list.output.find("1 message(s) waiting") != std::string::npos);
}

TEST_CASE("with policy park_message the rest of a failing key flows after the parked message") {
  ScopedSchema schema;
  TestBroker broker;
  outbox::OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto make = [&](const std::string& rk, const std::string& body) {
    outbox::Message m;
    m.exchange = outbox::Exchange(broker.exchange());
    m.routing_key = outbox::RoutingKey(rk);
    m.type = outbox::MessageType("Step");
    m.ordering_key = "k";
    m.payload = body;
    return writer.enqueue(tx, m);
  };
  make("unbound.route", "first");
  make(broker.routing_key(), "second");
  tx.commit();
  RelayProcess relay(per_key_yaml(schema.name(),
                                  "  max_attempts: 2\n  backoff_initial_ms: 100\n  backoff_max_ms: 200\n"
                                  "  key_failure_policy: park_message\n"));
  auto got = broker.receive(1, std::chrono::milliseconds(15000));
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  REQUIRE(got.size() == 1);
  CHECK(got[0].body == "second");
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE parked_at IS NOT NULL") == "1");
}

TEST_CASE("a joining relay gets its lanes, and a killed relay's lanes are taken over, within the bound") {
  ScopedSchema schema;
  // Documented bound: two rebalance intervals plus one batch (here 2 x 300 ms + a
  // small batch), measured with a margin for a loaded machine.
  const double bound_s = 3.0;
  RelayProcess a(per_key_yaml(schema.name()));
  auto a_has_all = [&] {
    auto h = lane_holdings(schema.name());
    return h.size() == 1 && h[0] == kLanes;
  };
  REQUIRE(seconds_until(a_has_all, 15) < 15);

  auto b = std::make_unique<RelayProcess>(per_key_yaml(schema.name()));
  auto balanced = [&] {
    auto h = lane_holdings(schema.name());
    return h.size() == 2 && h[0] == kLanes / 2 && h[1] == kLanes / 2;
  };
  // The newcomer first has to start and connect; measure from its first lane-free moment.
  double join_s = seconds_until(balanced, 15);
  MESSAGE("rebalance after a join took " << join_s << " s (includes process start)");
  CHECK(join_s < bound_s + 2.0);

  b->signal(SIGKILL);
  b->wait();
  double takeover_s = seconds_until(a_has_all, 15);
  MESSAGE("take-over after a kill took " << takeover_s << " s");
  CHECK(takeover_s < bound_s);
  a.signal(SIGTERM);
  CHECK(a.wait() == 0);
}
