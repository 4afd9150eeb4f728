// An idle relay: woken by producers' notifications, quiet on the database, and
// never stranding a row behind a long fallback poll.
#include "outbox/rabbitmq_c.h"
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <thread>

#include "http_scrape.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "policy/listen_arm_policy.h"
#include "relay_process.h"
#include "tcp_proxy.h"
#include "test_env.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_value;
using testenv::TestBroker;
using Clock = std::chrono::steady_clock;

namespace {

Message event_for(const TestBroker& broker, const std::string& routing_key = "") {
  Message m;
  m.exchange = Exchange(broker.exchange());
  m.routing_key = RoutingKey(routing_key.empty() ? broker.routing_key() : routing_key);
  m.type = MessageType("OrderPlaced");
  m.payload = R"({"order_id":1})";
  return m;
}

std::string enqueue(const ScopedSchema& schema, const Message& m) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto id = OutboxWriter({schema.name(), {}}).enqueue(tx, m);
  tx.commit();
  return id.to_string();
}

// True once some relay of the schema holds the "waiting" lock of migration 0004.
bool relay_armed(const ScopedSchema& schema) {
  return sql_value(
             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
             "AND mode = 'ExclusiveLock' AND classid = 1868724338 AND objid = hashtext('" +
             schema.name() + "')::oid") == "1";
}

// The session holding that lock and when it last started a statement ("" if none holds it).
std::string lock_holder_and_last_statement(const ScopedSchema& schema) {
  return sql_value(
      "SELECT coalesce(max(a.pid || ' ' || a.query_start::text), '') FROM pg_locks l "
      "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
      "AND l.mode = 'ExclusiveLock' AND l.classid = 1868724338 AND l.objid = hashtext('" +
      schema.name() + "')::oid");
}

// The application_name of the session holding the waiting lock ("" if none).
std::string lock_holder_app(const ScopedSchema& schema) {
  return sql_value(
      "SELECT coalesce(max(a.application_name), '') FROM pg_locks l JOIN pg_stat_activity a "
      "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.mode = "
      "'ExclusiveLock' AND l.classid = 1868724338 AND l.objid = hashtext('" +
      schema.name() + "')::oid");
}

void wait_armed(const ScopedSchema& schema, RelayProcess& relay) {
  REQUIRE_MESSAGE(testenv::eventually(std::chrono::seconds(10), [&] { return relay_armed(schema); }), relay.log());
}

// A relay configuration whose sessions carry `application_name` (to count their
// statements) and whose polls are far apart unless `relay_lines` say otherwise.
std::string quiet_yaml(const ScopedSchema& schema, const std::string& app, const std::string& relay_lines) {
  std::string dsn = testenv::pg_dsn();
  bool uri = dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0;
  dsn += uri ? std::string(dsn.find('?') == std::string::npos ? "?" : "&") + "application_name=" + app
             : " application_name=" + app;
  return "postgres:\n  dsn: \"" + dsn + "\"\n  schema: " + schema.name() +
         "\namqp:\n  uri: ${OUTBOX_AMQP_URI}\n  heartbeat_s: 5\n  confirm_timeout_ms: 10000\n"
         "relay:\n" +
         (relay_lines.find("batch_size:") == std::string::npos ? "  batch_size: 500\n" : "") + relay_lines +
         "log:\n  level: debug\n";
}

}  // namespace

TEST_CASE("an idle relay publishes a new row at once, woken by a notification, though it polls every 30 s") {
  ScopedSchema schema;
  TestBroker broker;
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("listen"),
                                "  poll_interval_ms: 30000\n  listen_poll_interval_ms: 30000\n"));
  wait_armed(schema, relay);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    auto id = enqueue(schema, event_for(broker));
    auto got = broker.receive(1, std::chrono::milliseconds(5000));
    const auto waited = Clock::now() - t0;
    REQUIRE(got.size() == 1);
    CHECK(got[0].message_id == id);
    MESSAGE("enqueue commit to receipt " << std::chrono::duration<double, std::milli>(waited).count() << " ms");
    CHECK(waited < std::chrono::seconds(3));  // far below the 30 s fallback poll
    wait_armed(schema, relay);                // idle again before the next row
  }
}

TEST_CASE("a row whose transaction was open while the relay went idle is published soon after it commits") {
  ScopedSchema schema;
  TestBroker broker;
  // The producer's insert happens before the relay waits, so it does not notify.
  pqxx::connection producer(testenv::pg_dsn());
  auto tx = std::make_unique<pqxx::work>(producer);
  auto id = OutboxWriter({schema.name(), {}}).enqueue(*tx, event_for(broker)).to_string();
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("listen"),
                                "  poll_interval_ms: 100\n  listen_poll_interval_ms: 30000\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK_FALSE(relay_armed(schema));  // it cannot arm while that transaction is open
  const auto t0 = Clock::now();
  tx->commit();
  tx.reset();
  auto got = broker.receive(1, std::chrono::milliseconds(5000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].message_id == id);
  CHECK(Clock::now() - t0 < std::chrono::seconds(3));
  wait_armed(schema, relay);  // and once it is closed, the relay waits for notifications
}

TEST_CASE("an idle relay starts at most one statement per second") {
  ScopedSchema schema;
  TestBroker broker;
  const auto app = testenv::unique_name("idle");
  RelayProcess relay(quiet_yaml(schema, app, ""));  // default intervals
  wait_armed(schema, relay);
  pqxx::connection conn(testenv::pg_dsn());
  std::map<int, std::string> last;  // session pid -> query_start
  int statements = 0;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(6)) {
    pqxx::nontransaction q(conn);
    for (const auto& r : outbox::pgx::exec_params(q,
                                                  "SELECT pid, query_start::text FROM pg_stat_activity "
                                                  "WHERE application_name = $1",
                                                  app)) {
      auto [it, added] = last.emplace(r[0].as<int>(), r[1].is_null() ? "" : r[1].c_str());
      if (!added && it->second != (r[1].is_null() ? "" : r[1].c_str())) {
        it->second = r[1].c_str();
        ++statements;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  MESSAGE(statements << " statements in 6 s from " << last.size() << " sessions");
  CHECK(last.size() >= 2);  // the sessions were seen: the count means something
  CHECK(statements <= 6);
}

TEST_CASE("a relay retries its own failed row when it is due, not at its next fallback poll") {
  ScopedSchema schema;
  TestBroker broker;
  enqueue(schema, event_for(broker, "nowhere"));  // unroutable: returned on every attempt
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("retry"),
                                "  poll_interval_ms: 60000\n  listen_poll_interval_ms: 60000\n"
                                "  max_attempts: 3\n  backoff_initial_ms: 300\n  backoff_max_ms: 300\n"));
  const std::string parked = "SELECT count(*) FROM \"" + schema.name() +
                             "\".outbox WHERE parked_at IS NOT NULL AND attempts = 3";
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(10), [&] { return sql_value(parked) == "1"; }),
                relay.log());  // three attempts within seconds, not minutes
}

TEST_CASE("a relay publishing rows one at a time keeps its waiting lock and claims once per message") {
  ScopedSchema schema;
  TestBroker broker;
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("armed"),
                                "  poll_interval_ms: 30000\n  listen_poll_interval_ms: 30000\n") +
                     "http:\n  listen: 127.0.0.1:0\n");
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  auto claims = [&] {
    return testenv::parse_prometheus(
        testenv::http_request(address, "/metrics").body)["outbox_relay_claim_duration_seconds_count"];
  };
  wait_armed(schema, relay);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its claim after arming
  const std::string before = lock_holder_and_last_statement(schema);
  REQUIRE(!before.empty());
  const double claims_before = claims();
  // More than ListenArmPolicy::kBusyRows: the relay is idle between them, not busy.
  constexpr int kMessages = static_cast<int>(relay::ListenArmPolicy::kBusyRows) + 4;
  for (int i = 0; i < kMessages; ++i) {
    auto id = enqueue(schema, event_for(broker));
    auto got = broker.receive(1, std::chrono::milliseconds(5000));
    REQUIRE(got.size() == 1);
    CHECK(got[0].message_id == id);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the relay is idle again
    // Still the same session holding the lock, and it ran nothing since: each
    // message cost the relay no unlock and lock on the listener.
    CHECK_MESSAGE(lock_holder_and_last_statement(schema) == before, relay.log());
  }
  // And one claim each: woken by its notification, the claim took it; the relay
  // then waited for the next notification rather than claim again to find nothing.
  CHECK_MESSAGE(claims() - claims_before == kMessages, relay.log());
}

TEST_CASE("a relay working through a backlog gives the waiting lock back, and takes it again when idle") {
  ScopedSchema schema;
  TestBroker broker;
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("busy"),
                                "  batch_size: 5\n  poll_interval_ms: 30000\n  listen_poll_interval_ms: 30000\n"));
  wait_armed(schema, relay);
  constexpr int kRows = 3000;
  {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    for (int i = 0; i < kRows; ++i) writer.enqueue(tx, event_for(broker));
    tx.commit();  // one notification wakes the relay
  }
  // Batches of 5 follow each other: once its claims reach ListenArmPolicy::kBusyRows
  // the relay lets go, and producers' commits stop notifying while it drains.
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(20), [&] { return !relay_armed(schema); }), relay.log());
  CHECK(broker.receive(kRows, std::chrono::milliseconds(10000)).size() == static_cast<std::size_t>(kRows));
  wait_armed(schema, relay);
}

TEST_CASE("a relay busy at a steady 5 000 msg/s leaves the waiting lock alone, so producers' commits do not notify") {
  ScopedSchema schema;
  TestBroker broker;
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("steady"), "  listen_poll_interval_ms: 30000\n") +
                     "http:\n  listen: 127.0.0.1:0\n");
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  wait_armed(schema, relay);
  pqxx::connection observer(testenv::pg_dsn());
  pqxx::nontransaction(observer).exec("LISTEN " + observer.quote_name("outbox_" + schema.name()));
  // Transactions of 20 rows every 4 ms, as steady producers commit them. A relay
  // holding the lock, or queued for it, makes each of them notify (one notification
  // per transaction: PostgreSQL folds a transaction's identical ones).
  std::atomic<bool> stop{false};
  std::atomic<int> transactions{0};
  std::thread producer([&] {
    pqxx::connection conn(testenv::pg_dsn());
    OutboxWriter writer({schema.name(), {}});
    const std::vector<Message> batch(20, event_for(broker));
    for (auto next = Clock::now(); !stop; next += std::chrono::milliseconds(4)) {
      pqxx::work tx(conn);
      writer.enqueue_batch(tx, batch);
      tx.commit();
      ++transactions;
      std::this_thread::sleep_until(next);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the relay is busy by now
  observer.get_notifs();                                 // what came before
  const int tx_before = transactions;
  int notified = 0, polling = 0;
  for (int i = 0; i < 30; ++i) {  // 3 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    notified += observer.get_notifs();
    polling += testenv::parse_prometheus(
                   testenv::http_request(address, "/metrics").body)["outbox_relay_listen_role{role=\"polling\"}"] == 1;
  }
  const int committed = transactions - tx_before;
  stop = true;
  producer.join();
  MESSAGE(committed << " producer transactions in 3 s, " << notified << " notified; role polling in " << polling
                    << " of 30 scrapes");
  // A steady rate well above the relay's 1 500 rows/s (ListenArmPolicy::kPollRows).
  REQUIRE(committed * 20 > 3 * 1500 * 2);
  // The relay before this (it took the lock whenever a claim found nothing): 1 093
  // notifications for 769 transactions, handovers included.
  CHECK_MESSAGE(notified * 20 < committed, relay.log());
  CHECK(polling > 0);  // what an operator sees
  const auto received = broker.receive(static_cast<std::size_t>(transactions) * 20, std::chrono::milliseconds(20000));
  CHECK(received.size() == static_cast<std::size_t>(transactions) * 20);
  wait_armed(schema, relay);  // idle again: it takes the lock, producers notify
}

TEST_CASE("of two idle relays only the lock holder claims each row, and the other takes over at once when it stops") {
  ScopedSchema schema;
  TestBroker broker;
  const std::string apps[2] = {testenv::unique_name("herd_a"), testenv::unique_name("herd_b")};
  const std::string lines = "  poll_interval_ms: 30000\n  listen_poll_interval_ms: 30000\n";
  std::unique_ptr<RelayProcess> relays[2];
  std::string addresses[2];
  for (int i = 0; i < 2; ++i) {
    relays[i] = std::make_unique<RelayProcess>(quiet_yaml(schema, apps[i], lines) + "http:\n  listen: 127.0.0.1:0\n");
    addresses[i] = testenv::wait_for_http_address([&] { return relays[i]->log(); }, std::chrono::seconds(20));
  }
  auto claims = [&](int i) {
    return testenv::parse_prometheus(
        testenv::http_request(addresses[i], "/metrics").body)["outbox_relay_claim_duration_seconds_count"];
  };
  wait_armed(schema, *relays[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both have claimed after starting
  const int holder = lock_holder_app(schema) == apps[0] ? 0 : 1, other = 1 - holder;
  REQUIRE(lock_holder_app(schema) == apps[holder]);
  auto role = [&](int i, const char* name) {
    return testenv::parse_prometheus(testenv::http_request(addresses[i], "/metrics")
                                         .body)[std::string("outbox_relay_listen_role{role=\"") + name + "\"}"];
  };
  CHECK(role(holder, "holder") == 1);
  CHECK(role(holder, "bystander") == 0);
  CHECK(role(other, "bystander") == 1);
  CHECK(role(other, "holder") == 0);
  const double before[2] = {claims(0), claims(1)};
  constexpr int kMessages = 20;
  for (int i = 0; i < kMessages; ++i) {
    auto id = enqueue(schema, event_for(broker));
    auto got = broker.receive(1, std::chrono::milliseconds(5000));
    REQUIRE(got.size() == 1);
    CHECK(got[0].message_id == id);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double holder_claims = claims(holder) - before[holder], other_claims = claims(other) - before[other];
  MESSAGE("claims for " << kMessages << " rows: holder " << holder_claims << ", the other " << other_claims);
  CHECK(holder_claims >= kMessages);
  // Woken by every insert, the other relay would claim for nothing once per row.
  CHECK_MESSAGE(other_claims <= 2, relays[other]->log());

  // The holder stops: it hands the lock over, so the other waits for inserts at once,
  // not after its 30 s fallback poll.
  relays[holder]->signal(SIGTERM);
  REQUIRE(relays[holder]->wait() == 0);
  const auto t0 = Clock::now();
  REQUIRE_MESSAGE(testenv::eventually(std::chrono::seconds(3), [&] { return lock_holder_app(schema) == apps[other]; }),
                  relays[other]->log());
  MESSAGE("the other relay took the lock " << std::chrono::duration<double, std::milli>(Clock::now() - t0).count()
                                           << " ms after the holder exited");
  auto id = enqueue(schema, event_for(broker));
  auto got = broker.receive(1, std::chrono::milliseconds(3000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].message_id == id);
}

namespace {

// Two idle relays, the holder of the waiting lock reaching the broker through a
// proxy the test breaks; both poll every 30 s only.
struct HolderBehindProxy {
  HolderBehindProxy() {
    std::string uri = testenv::amqp_uri();
    amqp_connection_info info;
    REQUIRE(amqp_parse_url(uri.data(), &info) == AMQP_STATUS_OK);
    proxy = std::make_unique<testenv::TcpProxy>("127.0.0.1", static_cast<std::uint16_t>(info.port));
    const std::string lines = "  poll_interval_ms: 30000\n  listen_poll_interval_ms: 30000\n";
    std::string yaml = quiet_yaml(schema, holder_app, lines);
    const std::string var = "${OUTBOX_AMQP_URI}";
    yaml.replace(yaml.find(var), var.size(), "amqp://guest:guest@127.0.0.1:" + std::to_string(proxy->port()) + "/%2f");
    holder = std::make_unique<RelayProcess>(yaml);
    REQUIRE_MESSAGE(testenv::eventually(std::chrono::seconds(10),
                                        [&] { return lock_holder_app(schema) == holder_app; }),
                    holder->log());
    other = std::make_unique<RelayProcess>(quiet_yaml(schema, other_app, lines));
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // it claimed, found the lock taken, sleeps
    REQUIRE(lock_holder_app(schema) == holder_app);
  }
  // A row committed now reaches the broker within `limit`.
  bool published_within(std::chrono::milliseconds limit) {
    auto id = enqueue(schema, event_for(broker));
    auto got = broker.receive(1, limit);
    return got.size() == 1 && got[0].message_id == id;
  }
  ScopedSchema schema;
  TestBroker broker;
  const std::string holder_app = testenv::unique_name("holder"), other_app = testenv::unique_name("other");
  std::unique_ptr<testenv::TcpProxy> proxy;
  std::unique_ptr<RelayProcess> holder, other;
};

}  // namespace

TEST_CASE_FIXTURE(HolderBehindProxy,
                  "a lock holder that loses its broker hands the lock over, and the other relay publishes at once") {
  proxy->set_refusing(true);
  REQUIRE(proxy->cut_all() >= 1);
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(5), [&] { return lock_holder_app(schema) == other_app; }),
                holder->log());
  CHECK_MESSAGE(published_within(std::chrono::milliseconds(3000)), other->log());  // not at its 30 s poll
}

TEST_CASE_FIXTURE(
    HolderBehindProxy,
    "a lock holder whose batch waits for confirms hands the lock over, and rows committed meanwhile go out") {
  proxy->set_stalled(true);  // its publish goes nowhere, and no confirm comes back
  auto stuck = enqueue(schema, event_for(broker));
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(5), [&] { return lock_holder_app(schema) == other_app; }),
                holder->log());
  CHECK_MESSAGE(published_within(std::chrono::milliseconds(3000)), other->log());
  proxy->set_stalled(false);  // and the first row follows (its batch times out, or is confirmed)
  auto got = broker.receive(1, std::chrono::milliseconds(20000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].message_id == stuck);
}

TEST_CASE("a relay answers producers itself once it finds that the lock holder does not") {
  ScopedSchema schema;
  TestBroker broker;
  // A session holding the waiting lock that no relay reads: a holder's session left
  // behind by a network partition, which the server keeps until its keepalive ends it
  // (a relay's session: the relay's application_name).
  pqxx::connection orphan(testenv::pg_dsn() + " application_name=outbox-relay");
  pqxx::nontransaction(orphan).exec("SELECT pg_advisory_lock(1868724338, hashtext('" + schema.name() + "'))");
  RelayProcess relay(quiet_yaml(schema, testenv::unique_name("bystander"),
                                "  poll_interval_ms: 30000\n  listen_poll_interval_ms: 3000\n") +
                     "http:\n  listen: 127.0.0.1:0\n");
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  auto role = [&](const char* name) {
    return testenv::parse_prometheus(testenv::http_request(address, "/metrics")
                                         .body)[std::string("outbox_relay_listen_role{role=\"") + name + "\"}"];
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // it found the lock taken
  CHECK(role("bystander") == 1);
  // The first row waits for the relay's fallback poll (3 s): that is how it finds out.
  auto first = enqueue(schema, event_for(broker));
  auto got = broker.receive(1, std::chrono::milliseconds(6000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].message_id == first);
  // From then on each row goes out on its notification, not 3 s later.
  for (int i = 0; i < 4; ++i) {
    const auto t0 = Clock::now();
    auto id = enqueue(schema, event_for(broker));
    got = broker.receive(1, std::chrono::milliseconds(5000));
    REQUIRE(got.size() == 1);
    CHECK(got[0].message_id == id);
    CHECK_MESSAGE(Clock::now() - t0 < std::chrono::milliseconds(1500), relay.log());
  }
  CHECK_MESSAGE(testenv::lines_with(relay.log(), "another relay (pid " + std::to_string(orphan.backendpid())) == 1,
                relay.log());
  CHECK(testenv::lines_with(relay.log(), "does not answer") == 1);
  CHECK(role("answering") == 1);  // what an operator sees
  CHECK(role("bystander") == 0);
}
