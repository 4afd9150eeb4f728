// ConsumerRunner against the real RabbitMQ and PostgreSQL, under faults that a
// hand-written producer, a careless handler or an outage bring: each one must end
// in a committed effect, a requeue or a dead letter, never in a message acked
// without its effect, and never in a worker spinning on the queue.

#include <arpa/inet.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pqxx_compat.h"
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
    outbox::pgx::exec_params(tx, "INSERT INTO " + s() + ".effects VALUES ($1::uuid, $2)", d.message_id.to_string(),
                             d.body);
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

// TCP_KEEPIDLE of every socket of this process connected to 127.0.0.1:`port`.
std::vector<int> keepalive_idle_of_sockets_to(std::uint16_t port) {
  std::vector<int> out;
  DIR* fds = opendir("/proc/self/fd");
  REQUIRE(fds != nullptr);
  while (dirent* e = readdir(fds)) {
    const int fd = std::atoi(e->d_name);
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (fd <= 2 || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || peer.sin_family != AF_INET ||
        ntohs(peer.sin_port) != port)
      continue;
    int on = 0, idle = 0;
    socklen_t n = sizeof on;
    getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &n);
    n = sizeof idle;
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &n);
    out.push_back(on ? idle : -1);
  }
  closedir(fds);
  return out;
}

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
  outbox::ConsumerRunner runner(options,
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.record_effect(tx, d); });
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

TEST_CASE("a PostgreSQL that accepts connections and never answers cannot hold a worker past connect_timeout") {
  // A hung server, or a pooler waiting for one: without a connect timeout the
  // worker's reconnect waited for ever, and stop() (SIGTERM) with it.
  Fixture f;
  ProxiedPostgres pg;
  auto options = f.options();
  options.pg_dsn = pg.dsn();
  options.connect_timeout = 2000ms;
  outbox::ConsumerRunner runner(options,
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.record_effect(tx, d); });
  runner.start();
  pg.proxy.set_stalled(true);  // new connections are accepted; no byte moves
  pg.proxy.cut_all();          // the worker's session goes
  f.publish("while the server hangs");
  REQUIRE(testenv::eventually(5s, [&] { return runner.counters().retried >= 1; }));
  std::this_thread::sleep_for(1s);  // the worker is reconnecting now
  runner.stop();
  auto stopped = std::async(std::launch::async, [&] { runner.wait(); });
  const bool in_time = stopped.wait_for(8s) == std::future_status::ready;
  pg.proxy.set_stalled(false);  // lets a hung worker go, so the test ends either way
  stopped.get();
  CHECK_MESSAGE(in_time, "stop() waited more than 8 s for a worker connecting to a silent server");
  CHECK(runner.counters().dead_lettered == 0);
}

TEST_CASE("a worker's PostgreSQL sessions carry the consumer's name and keepalives, unless the DSN sets its own") {
  Fixture f;
  ProxiedPostgres pg;
  auto options = f.options(2);
  options.pg_dsn = pg.dsn();
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base&, const outbox::Delivery&) {});
  runner.start();
  const std::string name = "outbox-consumer " + options.consumer.value();
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + name + "'") == "2");
  std::string idle;  // TCP_KEEPIDLE of each session's socket, -1 without keepalives
  for (int s : keepalive_idle_of_sockets_to(pg.proxy.port())) idle += std::to_string(s) + " ";
  CHECK(idle == "10 10 ");  // a dead host is noticed in 10 + 3 x 5 s, not the system's 2 h
  runner.stop();
  runner.wait();

  auto own = outbox::PgConnInfo::parse(pg.dsn());
  const std::string own_name = testenv::unique_name("billing");
  own.set("application_name", own_name);
  options.pg_dsn = own.to_string();
  outbox::ConsumerRunner chosen(options, [&](pqxx::transaction_base&, const outbox::Delivery&) {});
  chosen.start();
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + own_name + "'") == "2");
  chosen.stop();
  chosen.wait();
}

TEST_CASE("an AMQP timestamp no clock can hold reaches the handler as absent, never as a wrapped date") {
  // A hand-written producer may put any 64-bit value there. 2^64-1 was cast to -1 s
  // (1969: a false late delivery), 2^62 s overflowed the nanosecond clock.
  Fixture f;
  auto options = f.options();
  options.retention = outbox::RetentionPolicy{};  // 30 d: a 1969 timestamp would be late
  std::mutex mutex;
  std::map<std::string, std::optional<std::int64_t>> seen;  // body -> timestamp in s
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base&, const outbox::Delivery& d) {
    std::lock_guard lock(mutex);
    seen[d.body] = d.timestamp
                       ? std::optional<std::int64_t>(
                             std::chrono::duration_cast<std::chrono::seconds>(d.timestamp->time_since_epoch()).count())
                       : std::nullopt;
  });
  runner.start();
  const auto now_s = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  for (auto [body, ts] : {std::pair<std::string, std::uint64_t>{"now", now_s},
                          {"max", ~std::uint64_t{0}},
                          {"2^62", std::uint64_t{1} << 62}}) {
    testenv::TestPublisher::Options o;
    o.message_id = MessageId::generate_v7().to_string();
    o.timestamp_unix_s = ts;
    f.publisher.publish(f.topology.exchange, f.topology.routing_key, body, o);
  }
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 3; }));
  runner.stop();
  runner.wait();
  std::lock_guard lock(mutex);
  CHECK(seen["now"] == std::optional<std::int64_t>(static_cast<std::int64_t>(now_s)));
  CHECK_FALSE(seen["max"].has_value());
  CHECK_FALSE(seen["2^62"].has_value());
  CHECK(runner.counters().late_deliveries == 0);  // the UUIDv7 time stands in: fresh
}
