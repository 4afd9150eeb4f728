// The relay's /metrics, /healthz and /readyz against real PostgreSQL and RabbitMQ:
// scraped over HTTP and parsed, the numbers match what happened.
#include <doctest/doctest.h>

#include <csignal>
#include <fstream>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <thread>

#include "http_scrape.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::TestBroker;

namespace {

using testenv::contains;

void enqueue(const ScopedSchema& schema, const std::string& exchange, const std::string& key, int n) {
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (int i = 0; i < n; ++i) {
    Message m;
    m.exchange = Exchange(exchange);
    m.routing_key = RoutingKey(key);
    m.type = MessageType("OrderPlaced");
    m.payload = R"({"n":)" + std::to_string(i) + "}";
    writer.enqueue(tx, m);
  }
  tx.commit();
}

std::string http_yaml(const std::string& schema, const std::string& extra_relay = "") {
  return testenv::relay_config_yaml(schema, extra_relay) + "http:\n  listen: 127.0.0.1:0\n  stats_interval_s: 1\n";
}

// Scrapes until `done(metrics)` or the time is up; returns the last scrape.
template <class Done>
std::map<std::string, double> scrape_until(const std::string& address, Done done) {
  std::map<std::string, double> m;
  for (int i = 0; i < 200; ++i) {
    m = testenv::parse_prometheus(testenv::http_request(address, "/metrics").body);
    if (done(m)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return m;
}

// Each published row (and only those) has its five stages observed, and they add up
// to created_at -> commit: at least its created_at -> ack (enqueue_to_confirm, taken
// just before its batch's mark), at most that plus its batch's mark and commit. The
// relay loop's CPU went into every stage.
void check_stage_breakdown(std::map<std::string, double>& m, int published, int claimed) {
  double total = 0;
  for (const char* stage : {"queued", "claim", "publish", "confirm", "settle"}) {
    INFO(stage);
    auto at = [&](const char* part) {
      return m[std::string("outbox_relay_stage_seconds_") + part + "{stage=\"" + stage + "\"}"];
    };
    CHECK(at("count") == published);
    CHECK(at("sum") >= 0);
    total += at("sum");
  }
  const double to_ack = m["outbox_relay_enqueue_to_confirm_seconds_sum"];
  CHECK(total >= to_ack - 0.001);
  CHECK(total <= to_ack + claimed * m["outbox_relay_mark_duration_seconds_sum"] + 0.001);
  for (const char* stage : {"claim", "decode", "publish", "settle", "mark"}) {
    INFO(stage);
    CHECK(m[std::string("outbox_relay_stage_cpu_seconds_total{stage=\"") + stage + "\"}"] > 0);
  }
}

}  // namespace

TEST_CASE("/metrics counts published, returned and parked rows and the backlog the relay sees") {
  ScopedSchema schema;
  TestBroker broker;
  enqueue(schema, broker.exchange(), broker.routing_key(), 30);
  enqueue(schema, broker.exchange(), "unbound-key", 2);  // unroutable: returned, then parked
  RelayProcess relay(http_yaml(schema.name(), "  max_attempts: 1\n"));
  auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));

  auto m = scrape_until(address, [](auto& m) {
    return m["outbox_relay_published_total"] == 30 && m["outbox_relay_parked_rows"] == 2 &&
           m["outbox_relay_stage_seconds_count{stage=\"settle\"}"] == 30;  // observed just after the commit
  });
  CHECK(m["outbox_relay_published_total"] == 30);
  CHECK(m["outbox_relay_publish_failures_total{reason=\"returned\"}"] == 2);
  CHECK(m["outbox_relay_publish_failures_total{reason=\"nack\"}"] == 0);
  CHECK(m["outbox_relay_parked_total"] == 2);
  CHECK(m["outbox_relay_parked_rows"] == 2);
  CHECK(m["outbox_relay_pending_rows"] == 0);
  CHECK(m["outbox_relay_oldest_pending_age_seconds"] == 0);
  CHECK(m["outbox_relay_connected{peer=\"postgres\"}"] == 1);
  CHECK(m["outbox_relay_connected{peer=\"amqp\"}"] == 1);
  CHECK(m["outbox_relay_enqueue_to_confirm_seconds_count"] == 30);  // acked rows only
  CHECK(m["outbox_relay_publish_to_confirm_seconds_count"] == 32);  // returned rows are acked too
  CHECK(m["outbox_relay_publish_to_confirm_seconds_bucket{le=\"+Inf\"}"] == 32);
  CHECK(m["outbox_relay_batch_size_rows_sum"] == 32);
  CHECK(m["outbox_relay_claim_duration_seconds_count"] >= 1);
  CHECK(m["outbox_relay_mark_duration_seconds_count"] >= 1);
  CHECK(m["outbox_relay_last_claim_timestamp_seconds"] > 1.7e9);
  check_stage_breakdown(m, 30, 32);
  CHECK(m.count("outbox_relay_build_info{version=\"" + std::string(OUTBOX_TEST_VERSION) + "\"}") == 1);
  CHECK(broker.receive(30, std::chrono::milliseconds(1500)).size() == 30);

  auto reply = testenv::http_request(address, "/metrics");
  CHECK(reply.status == 200);
  CHECK(reply.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(testenv::python_prometheus_check(reply.body) == "");

  // Every metric the Grafana dashboard queries is exported.
  std::ifstream dashboard(OUTBOX_DASHBOARD);
  std::stringstream text;
  text << dashboard.rdbuf();
  const std::regex name(R"(outbox_relay_[a-z_]+)");
  int used = 0;
  const auto json = text.str();
  for (std::sregex_iterator it(json.begin(), json.end(), name), end; it != end; ++it, ++used)
    CHECK_MESSAGE(contains(reply.body, "\n" + it->str()), it->str());
  CHECK(used > 20);

  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
}

TEST_CASE("/healthz and /readyz answer 200 when connected and claiming; other paths and methods are refused") {
  ScopedSchema schema;
  RelayProcess relay(http_yaml(schema.name()));
  auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  testenv::HttpReply ready;
  for (int i = 0; i < 100 && ready.status != 200; ++i) {
    ready = testenv::http_request(address, "/readyz");
    if (ready.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(ready.status == 200);
  CHECK(ready.body == "ready\n");
  auto health = testenv::http_request(address, "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");
  CHECK(testenv::http_request(address, "/nope").status == 404);
  CHECK(testenv::http_request(address, "/metrics", "POST").status == 405);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
}

TEST_CASE("an idle relay stays ready: a fallback poll that finds nothing due counts as a claim") {
  ScopedSchema schema;
  RelayProcess relay(testenv::relay_config_yaml(schema.name(), "  listen_poll_interval_ms: 300\n") +
                     "http:\n  listen: 127.0.0.1:0\n  ready_max_claim_age_s: 2\n");
  auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  CHECK(testenv::eventually(std::chrono::seconds(10),
                            [&] { return testenv::http_request(address, "/readyz").status == 200; }));
  // Idle (listening, nothing enqueued) for twice the claim age: still ready.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until) {
    auto ready = testenv::http_request(address, "/readyz");
    REQUIRE_MESSAGE(ready.status == 200, ready.body);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

TEST_CASE("/readyz is 503 naming the broker while RabbitMQ is unreachable, and /healthz stays 200") {
  ScopedSchema schema;
  auto yaml = http_yaml(schema.name());
  // A port nobody listens on (the AMQP port is the shared broker's; one below is free).
  auto at = yaml.find("${OUTBOX_AMQP_URI}");
  yaml.replace(at, std::string("${OUTBOX_AMQP_URI}").size(), "amqp://guest:guest@127.0.0.1:1/%2f");
  RelayProcess relay(yaml);
  auto address = testenv::wait_for_http_address([&] { return relay.log(); }, std::chrono::seconds(20));
  // Named with the last attempt's error, once the first attempt has failed.
  testenv::HttpReply ready;
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(10),
                                    [&] {
                                      ready = testenv::http_request(address, "/readyz");
                                      return ready.body.find("(connection refused)") != std::string::npos;
                                    }),
                ready.body);
  CHECK(ready.status == 503);
  CHECK_MESSAGE(ready.body.rfind("not connected to RabbitMQ: AMQP: cannot connect to 127.0.0.1:1/", 0) == 0,
                ready.body);
  CHECK(testenv::http_request(address, "/healthz").status == 200);
  auto m = testenv::parse_prometheus(testenv::http_request(address, "/metrics").body);
  CHECK(m["outbox_relay_connected{peer=\"amqp\"}"] == 0);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
}

TEST_CASE("a port already in use fails the start with exit 1 and names the address") {
  ScopedSchema schema;
  RelayProcess first(http_yaml(schema.name()));
  auto address = testenv::wait_for_http_address([&] { return first.log(); }, std::chrono::seconds(20));
  auto yaml = testenv::relay_config_yaml(schema.name()) + "http:\n  listen: " + address + "\n";
  RelayProcess second(yaml);
  CHECK(second.wait() == 1);
  CHECK(contains(second.log(), "cannot listen on " + address));
  first.signal(SIGTERM);
  CHECK(first.wait() == 0);
}
