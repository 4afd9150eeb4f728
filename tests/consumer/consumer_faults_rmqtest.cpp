// ConsumerRunner against the real RabbitMQ and PostgreSQL, under faults that a
// hand-written producer, a careless handler or an outage bring: each one must end
// in a committed effect, a requeue or a dead letter, never in a message acked
// without its effect, and never in a worker spinning on the queue.

#include <doctest/doctest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/pg_conninfo.h"
#include "tcp_proxy.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;
using outbox::MessageId;

// A schema with an effects table (one row per committed handler run) and this
// test's own exchange, queue and dead-letter route.
struct Fixture {
  testenv::ScopedSchema schema{"cfault"};
  testenv::ConsumerTopology topology{"cfault"};
  testenv::TestPublisher publisher;

  Fixture() { testenv::sql_exec("CREATE TABLE " + s() + ".effects (message_id uuid NOT NULL, body text)"); }
  const std::string& s() const { return schema.name(); }

  outbox::RunnerOptions options(int concurrency = 1) const {
    return topology.options(s(), testenv::unique_name("consumer"), concurrency);
  }
  void publish(const std::string& body) {
    testenv::TestPublisher::Options o;
    o.message_id = MessageId::generate_v7().to_string();
    publisher.publish(topology.exchange, topology.routing_key, body, o);
  }
  void record_effect(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
    tx.exec_params("INSERT INTO " + s() + ".effects VALUES ($1::uuid, $2)", d.message_id.to_string(), d.body);
  }
  int effects() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + s() + ".effects")); }
  int inbox_rows() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + s() + ".inbox")); }
};

// The test PostgreSQL behind a TcpProxy, and a DSN that goes through it.
struct ProxiedPostgres {
  outbox::PgConnInfo info = outbox::PgConnInfo::parse(testenv::pg_dsn());
  testenv::TcpProxy proxy{info.get("host").value_or("127.0.0.1"),
                          static_cast<std::uint16_t>(std::stoi(info.get("port").value_or("5432")))};
  std::string dsn() {
    auto through = info;
    through.set("host", "127.0.0.1");
    through.set("port", std::to_string(proxy.port()));
    return through.to_string();
  }
};

}  // namespace

TEST_CASE("a handler that swallows an SQL error is a failed try, never a message acked without its effect") {
  // PostgreSQL answers COMMIT in an aborted transaction with ROLLBACK, not an error:
  // the effect and the inbox row vanish. Acking then would lose the message.
  Fixture f;
  auto options = f.options();
  options.max_attempts = 2;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    ++calls;
    f.record_effect(tx, d);
    try {
      tx.exec("SELECT 1 / 0");  // an optional step whose failure the handler ignores
    } catch (const pqxx::sql_error&) {
    }
  });
  runner.start();
  f.publish("swallowed");
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 2);
  CHECK(runner.counters().processed == 0);
  CHECK(runner.counters().failed == 2);
  CHECK(runner.counters().dead_lettered == 1);
  CHECK(f.effects() == 0);
  CHECK(f.inbox_rows() == 0);
}

TEST_CASE("while PostgreSQL is unreachable a worker backs off instead of cycling its message through the queue") {
  // Each delivery during an outage fails at once (connection refused) and is requeued
  // without a counted try; without a growing pause the worker takes it back at once,
  // retry_delay after retry_delay (here 10 ms): hundreds of deliveries and log lines
  // a second per worker, for as long as the outage lasts.
  Fixture f;
  ProxiedPostgres pg;
  auto options = f.options();
  options.pg_dsn = pg.dsn();
  options.max_attempts = 1;  // a counted try would dead-letter the message
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);
  });
  runner.start();
  pg.proxy.set_refusing(true);
  pg.proxy.cut_all();  // the worker's session goes; new ones are refused
  f.publish("during the outage");
  std::this_thread::sleep_for(4s);
  const auto deliveries = runner.counters().retried.load();
  CHECK(deliveries >= 1);
  CHECK_MESSAGE(deliveries <= 5, deliveries << " deliveries in 4 s of outage");
  pg.proxy.set_refusing(false);
  REQUIRE(testenv::eventually(20s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(f.effects() == 1);
}
