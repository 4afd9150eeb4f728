// Migration 0004's insert notification and the relay's NotifyListener, on a real
// PostgreSQL: producers notify only while a relay waits.
#include <doctest/doctest.h>

#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "outbox/outbox_writer.h"
#include "pg/notify_listener.h"
#include "test_env.h"

using namespace outbox;
using relay::NotifyListener;
using testenv::ScopedSchema;
using Arm = NotifyListener::Arm;

namespace {

relay::PostgresConfig config_for(const ScopedSchema& schema) {
  relay::PostgresConfig c;
  c.dsn = testenv::pg_dsn();
  c.schema = schema.name();
  return c;
}

Message event(int n) {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = "{\"n\":" + std::to_string(n) + "}";
  return m;
}

void enqueue(const ScopedSchema& schema, int count = 1) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  std::vector<Message> batch;
  for (int i = 0; i < count; ++i) batch.push_back(event(i));
  OutboxWriter({schema.name(), {}}).enqueue_batch(tx, batch);
  tx.commit();
}

// Notifications received on `conn` within `wait` (LISTEN already issued).
int notifications(pqxx::connection& conn, std::chrono::milliseconds wait) {
  int n = 0;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    n += conn.get_notifs();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return n;
}

std::unique_ptr<pqxx::connection> raw_listener(const ScopedSchema& schema) {
  auto conn = std::make_unique<pqxx::connection>(testenv::pg_dsn());
  pqxx::nontransaction(*conn).exec("LISTEN " + conn->quote_name(NotifyListener::channel_of(schema.name())));
  return conn;
}

}  // namespace

TEST_CASE("an insert notifies the schema's channel only while a relay holds the waiting lock") {
  ScopedSchema schema;
  auto observer = raw_listener(schema);
  NotifyListener relay(config_for(schema), std::chrono::milliseconds(200));
  relay.connect();

  enqueue(schema);
  CHECK(notifications(*observer, std::chrono::milliseconds(300)) == 0);  // no relay waits

  REQUIRE(relay.arm() == Arm::kArmed);
  enqueue(schema);
  CHECK(notifications(*observer, std::chrono::milliseconds(500)) == 1);
  for (int i = 0; i < 100 && !relay.take_notifications().producer; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // (the observer saw it first)

  relay.disarm(NotifyListener::Release::kQuiet);  // busy again: producers stop notifying
  enqueue(schema);
  CHECK(notifications(*observer, std::chrono::milliseconds(300)) == 0);
}

TEST_CASE("a statement inserting a batch sends one notification, not one per row") {
  ScopedSchema schema;
  auto observer = raw_listener(schema);
  NotifyListener relay(config_for(schema), std::chrono::milliseconds(200));
  relay.connect();
  REQUIRE(relay.arm() == Arm::kArmed);
  enqueue(schema, 50);
  CHECK(notifications(*observer, std::chrono::milliseconds(500)) == 1);
}

TEST_CASE("arming waits for an open producer transaction that did not notify, and says so when it stays open") {
  ScopedSchema schema;
  NotifyListener relay(config_for(schema), std::chrono::milliseconds(200));
  relay.connect();
  pqxx::connection producer(testenv::pg_dsn());
  auto tx = std::make_unique<pqxx::work>(producer);
  OutboxWriter({schema.name(), {}}).enqueue(*tx, event(1));  // not armed: no notification

  const auto t0 = std::chrono::steady_clock::now();
  CHECK(relay.arm() == Arm::kProducerBusy);  // its row is invisible until it commits
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(150));
  CHECK_FALSE(relay.armed());

  tx->commit();
  tx.reset();
  CHECK(relay.arm() == Arm::kArmed);  // from now on every insert notifies
}

namespace {

// What `listener` took within `wait`, all of it.
NotifyListener::Wake wake_of(NotifyListener& listener, std::chrono::milliseconds wait) {
  NotifyListener::Wake all;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    const auto w = listener.take_notifications();
    all.producer = all.producer || w.producer;
    all.handover = all.handover || w.handover;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return all;
}

// Two relays' listeners on one schema, the first holding the waiting lock.
struct TwoRelays {
  TwoRelays() {
    first.connect();
    second.connect();
    REQUIRE(first.arm() == Arm::kArmed);
    REQUIRE(second.arm() == Arm::kOtherRelay);
    CHECK_MESSAGE(second.lock_holder().rfind("another relay (pid ", 0) == 0, second.lock_holder());
  }
  ScopedSchema schema;
  NotifyListener first{config_for(schema), std::chrono::milliseconds(200)};
  NotifyListener second{config_for(schema), std::chrono::milliseconds(200)};
};

}  // namespace

TEST_CASE_FIXTURE(
    TwoRelays,
    "the holder giving the lock back with a handover wakes the other relays, not itself, and frees the lock") {
  first.disarm(NotifyListener::Release::kHandOver);
  const auto woken = wake_of(second, std::chrono::milliseconds(500));
  CHECK(woken.handover);
  CHECK_FALSE(woken.producer);  // a handover is not an insert
  const auto own = wake_of(first, std::chrono::milliseconds(100));
  CHECK_FALSE(own.any());              // its own handover is left out
  CHECK(second.arm() == Arm::kArmed);  // the lock was free when the notification came

  second.disarm(NotifyListener::Release::kQuiet);  // a quiet release wakes nobody
  CHECK_FALSE(wake_of(first, std::chrono::milliseconds(300)).any());
}

TEST_CASE_FIXTURE(TwoRelays,
                  "both listeners receive an insert's notification; only the holder's relay loop answers it") {
  enqueue(schema);
  bool first_woken = false, second_woken = false;
  for (int i = 0; i < 100 && !(first_woken && second_woken); ++i) {
    first_woken = first.take_notifications().producer || first_woken;
    second_woken = second.take_notifications().producer || second_woken;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(first_woken);
  CHECK(second_woken);
}

TEST_CASE("the lock goes with the listener's session: a relay that dies stops the notifications") {
  ScopedSchema schema;
  auto observer = raw_listener(schema);
  {
    NotifyListener relay(config_for(schema), std::chrono::milliseconds(200));
    relay.connect();
    REQUIRE(relay.arm() == Arm::kArmed);
  }  // session closed without disarm()
  // The server releases the lock when the backend has exited.
  const std::string held =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1868724338 "
      "AND objid = hashtext('" +
      schema.name() + "')::oid";
  for (int i = 0; i < 500 && testenv::sql_value(held) != "0"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(testenv::sql_value(held) == "0");
  enqueue(schema);
  CHECK(notifications(*observer, std::chrono::milliseconds(300)) == 0);
}

TEST_CASE(
    "a session that took the waiting lock by hand is not called a relay: its pid, user and application are named") {
  ScopedSchema schema;
  pqxx::connection intruder(testenv::pg_dsn() + " application_name=shop-console");
  pqxx::nontransaction(intruder).exec("SELECT pg_advisory_lock(1868724338, hashtext(" + intruder.quote(schema.name()) +
                                      "))");
  NotifyListener listener{config_for(schema), std::chrono::milliseconds(200)};
  listener.connect();
  REQUIRE(listener.arm() == Arm::kOtherRelay);
  const auto& holder = listener.lock_holder();
  CHECK_MESSAGE(holder.rfind("a session that does not look like a relay (pid " + std::to_string(intruder.backendpid()),
                             0) == 0,
                holder);
  CHECK_MESSAGE(holder.find("application 'shop-console'") != std::string::npos, holder);
}
