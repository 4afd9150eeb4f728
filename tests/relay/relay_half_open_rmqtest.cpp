// Half-open links (issue 37): a peer that stops answering without closing the
// connection (a blackholed route, a frozen host, a NAT that lost its state), on the
// PostgreSQL side and on the AMQP side. Real dropped packets (LoopbackBlackhole) in
// front of a TcpProxy, so the kernel's timeouts are what the relay relies on. While
// it lasts the metrics tell the truth (not connected, backlog figures ageing), the
// liveness endpoint can fail; publishing resumes within 5 s of the link's return and
// no row is lost.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "http_scrape.h"
#include "loopback_blackhole.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "tcp_proxy.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::TcpProxy;
using testenv::TestBroker;

namespace {

using Clock = std::chrono::steady_clock;

// Bounds the test states (and docs/OPERATIONS.md "Half-open links" explains): with
// tcp_user_timeout_ms 2000 and keepalives_idle_s 2 a dead PostgreSQL session is
// noticed within about 7 s (2 s + one 5 s keepalive interval when idle); with
// heartbeat_s 2 a dead AMQP connection within about 2 heartbeats.
std::string yaml(const std::string& schema, int pg_port, int amqp_port) {
  return "postgres:\n  dsn: \"" + testenv::pg_dsn_via(pg_port) + "\"\n  schema: " + schema +
         "\n  connect_timeout_s: 2\n  keepalives_idle_s: 2\n  tcp_user_timeout_ms: 2000\n"
         "  idle_in_transaction_timeout_ms: 5000\n"
         "amqp:\n  uri: \"" +
         testenv::amqp_uri_via(amqp_port) +
         "\"\n  connect_timeout_ms: 2000\n  heartbeat_s: 2\n  confirm_timeout_ms: 3000\n"
         "relay:\n  batch_size: 100\n  poll_interval_ms: 50\n  backoff_initial_ms: 100\n  backoff_max_ms: 500\n"
         "http:\n  listen: 127.0.0.1:0\n  stats_interval_s: 1\n  ready_max_claim_age_s: 5\n"
         "  live_max_disconnected_s: 3\nlog:\n  level: info\n";
}

// Rows written steadily (5 every 100 ms, straight to PostgreSQL, not through the
// proxy) until stop(); ids() is every message id committed.
class SteadyProducer {
 public:
  SteadyProducer(const ScopedSchema& schema, const TestBroker& broker)
      : thread_([&, name = schema.name()] {
          OutboxWriter writer({name, {}});
          pqxx::connection conn(testenv::pg_dsn());
          while (!stop_) {
            std::vector<Message> batch(5);
            for (auto& m : batch) {
              m.exchange = Exchange(broker.exchange());
              m.routing_key = RoutingKey(broker.routing_key());
              m.type = MessageType("HalfOpen");
              m.payload = "{}";
            }
            pqxx::work tx(conn);
            auto ids = writer.enqueue_batch(tx, batch);
            tx.commit();
            {
              std::lock_guard lock(mu_);
              for (const auto& id : ids) ids_.insert(id.to_string());
            }
            std::this_thread::sleep_for(100ms);
          }
        }) {}
  ~SteadyProducer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::set<std::string> ids() {
    std::lock_guard lock(mu_);
    return ids_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<std::string> ids_;
  std::thread thread_;
};

long long published(const ScopedSchema& s) {
  return std::stoll(testenv::sql_value("SELECT count(*) FROM \"" + s.name() +
                                       "\".outbox WHERE published_at IS NOT NULL"));
}

std::map<std::string, double> metrics(const std::string& address) {
  return testenv::parse_prometheus(testenv::http_request(address, "/metrics").body);
}

// Blackholes the link to `target` ("postgres" or "amqp") for `hold`, checking what
// the relay says meanwhile; then heals it and returns how long publishing took to
// resume. Every row written meanwhile must arrive.
std::chrono::milliseconds blackhole_and_heal(const std::string& target, std::chrono::seconds notice_within) {
  ScopedSchema schema;
  TestBroker broker;
  TcpProxy pg("127.0.0.1", static_cast<std::uint16_t>(testenv::pg_port()));
  TcpProxy amqp("127.0.0.1", static_cast<std::uint16_t>(testenv::amqp_port()));
  RelayProcess relay(yaml(schema.name(), pg.port(), amqp.port()));
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  SteadyProducer producer(schema, broker);
  REQUIRE_MESSAGE(testenv::eventually(15s, [&] { return published(schema) >= 50; }), relay.log());

  const auto series = "outbox_relay_connected{peer=\"" + target + "\"}";
  testenv::LoopbackBlackhole hole(target == "postgres" ? pg.port() : amqp.port());
  const auto cut = Clock::now();
  // Noticed: not connected, in the metrics and on /readyz, within the stated bound.
  CHECK_MESSAGE(testenv::eventually(
                    notice_within, [&] { return metrics(address)[series] == 0; }, 100ms),
                relay.log());
  const auto noticed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cut);
  MESSAGE(target << " link blackholed: noticed after " << noticed.count() << " ms");
  const auto ready = testenv::http_request(address, "/readyz");
  CHECK(ready.status == 503);
  CHECK_MESSAGE(ready.body.find(target == "postgres" ? "not connected to PostgreSQL" : "not connected to RabbitMQ") !=
                    std::string::npos,
                ready.body);
  // Liveness fails once disconnected for over live_max_disconnected_s (3 s).
  CHECK_MESSAGE(testenv::eventually(10s, [&] { return testenv::http_request(address, "/healthz").status == 503; }),
                relay.log());
  if (target == "postgres") {
    // The backlog figures cannot be measured: their age says so (stats every 1 s).
    CHECK(testenv::eventually(10s, [&] { return metrics(address)["outbox_relay_backlog_age_seconds"] > 3; }));
  }
  std::this_thread::sleep_for(2s);  // the relay keeps trying to connect into the hole

  const auto before = published(schema);
  hole.heal();
  const auto healed = Clock::now();
  REQUIRE_MESSAGE(testenv::eventually(
                      20s, [&] { return published(schema) > before; }, 50ms),
                  relay.log());
  const auto resumed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - healed);
  MESSAGE(target << " link healed: publishing resumed after " << resumed.count() << " ms");
  CHECK(testenv::eventually(10s, [&] { return testenv::http_request(address, "/healthz").status == 200; }));
  if (target == "postgres")
    CHECK(testenv::eventually(10s, [&] { return metrics(address)["outbox_relay_backlog_age_seconds"] < 3; }));

  // Nothing lost: every row written is published (rows a dead session held locked
  // wait for the server's idle-in-transaction timeout, 5 s here) and arrives.
  producer.stop();
  const auto ids = producer.ids();
  CHECK_MESSAGE(testenv::eventually(30s, [&] { return published(schema) == static_cast<long long>(ids.size()); }),
                relay.log());
  std::set<std::string> arrived;
  for (const auto& m : broker.receive(ids.size() * 3, 3s)) arrived.insert(m.message_id);
  CHECK(arrived == ids);
  return resumed;
}

}  // namespace

TEST_CASE("a blackholed PostgreSQL link is noticed within seconds, reported, and publishing resumes within 5 s") {
  CHECK(blackhole_and_heal("postgres", 10s) <= 5s);
}

TEST_CASE("a blackholed RabbitMQ link is noticed within seconds, reported, and publishing resumes within 5 s") {
  CHECK(blackhole_and_heal("amqp", 10s) <= 5s);
}
