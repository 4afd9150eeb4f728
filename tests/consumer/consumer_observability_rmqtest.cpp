// What an operator sees of a ConsumerRunner against the real RabbitMQ and
// PostgreSQL: its counters scraped over HTTP in Prometheus format after real
// duplicate, dead-lettered and late deliveries, and JSON log lines whose fields
// (consumer, message_id, attempt, reason) a log pipeline can filter on.

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>

#include "consumer_test_support.h"
#include "http_scrape.h"
#include "loopback_http_server.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/json_log.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;
using outbox::MessageId;

// The application's /metrics: the runner's registry mounted on an HTTP server (the
// relay's, as any application's server would serve the same text).
class MetricsEndpoint {
 public:
  explicit MetricsEndpoint(outbox::metrics::Registry& registry)
      : server_(relay::HttpRoutes{[&registry] { return registry.render(); },
                                  [] { return std::optional<std::string>(); },
                                  [] { return std::optional<std::string>(); }}) {}
  std::map<std::string, double> scrape() const {
    auto reply = testenv::http_request(server_.address(), "/metrics");
    REQUIRE(reply.status == 200);
    REQUIRE(testenv::python_prometheus_check(reply.body) == "");
    return testenv::parse_prometheus(reply.body);
  }

 private:
  testenv::LoopbackHttpServer server_;
};

struct Fixture {
  testenv::ScopedSchema schema{"observed"};
  testenv::ConsumerTopology topology{"observed"};
  testenv::TestPublisher publisher;
  const std::string consumer = testenv::unique_name("consumer");

  outbox::RunnerOptions options() const { return topology.options(schema.name(), consumer); }
  std::string publish(const std::string& body, const std::string& id, std::optional<std::uint64_t> sent = {}) {
    testenv::TestPublisher::Options o;
    o.message_id = id;
    o.timestamp_unix_s = sent;
    publisher.publish(topology.exchange, topology.routing_key, body, o);
    return id;
  }
};

// The default logger writes JSON lines into a string for the test's length.
class CapturedJsonLog {
 public:
  CapturedJsonLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_formatter(outbox::json_log_formatter());
    spdlog::set_default_logger(logger);
  }
  ~CapturedJsonLog() { spdlog::set_default_logger(previous_); }
  // Every line, parsed. REQUIRES: nothing logs meanwhile (the runner stopped).
  std::vector<nlohmann::json> lines() const {
    std::vector<nlohmann::json> parsed;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) parsed.push_back(nlohmann::json::parse(line));
    return parsed;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace

TEST_CASE("the runner's counters are scraped over HTTP with the names the docs promise") {
  Fixture f;
  auto options = f.options();
  options.retention = outbox::RetentionPolicy{std::chrono::hours(48), std::chrono::hours(24), 1000};
  outbox::ConsumerRunner runner(options, [](pqxx::transaction_base&, const outbox::Delivery& d) {
    if (d.body == "poison") throw outbox::PermanentError("payload breaks the event schema");
  });
  MetricsEndpoint endpoint(runner.metrics());
  runner.start();
  const auto once = f.publish("a", MessageId::generate_v7().to_string());
  f.publish("a again", once);  // a real duplicate delivery: same message id
  f.publish("a third time", once);
  f.publish("poison", MessageId::generate_v7().to_string());
  // The AMQP timestamp says when it was sent (it wins over the id's own time).
  const auto three_days_ago = static_cast<std::uint64_t>(std::time(nullptr)) - 3 * 24 * 3600;
  f.publish("late", MessageId::generate_v7().to_string(), three_days_ago);
  REQUIRE(testenv::eventually(10s, [&] {
    auto c = runner.counters().snapshot();
    return c.processed + c.duplicates + c.dead_lettered == 5;
  }));

  const auto scraped = endpoint.scrape();
  const std::string label = "{consumer=\"" + f.consumer + "\"}";
  const auto value = [&](const std::string& name) {
    const std::string series = name + label;
    auto it = scraped.find(series);
    REQUIRE_MESSAGE(it != scraped.end(), series);
    return it->second;
  };
  CHECK(value("outbox_consumer_processed_total") == 2);  // "a" and "late"
  CHECK(value("inbox_duplicates_total") == 2);
  CHECK(value("outbox_consumer_dead_lettered_total") == 1);
  CHECK(value("outbox_consumer_failed_total") == 1);
  CHECK(value("outbox_consumer_retried_total") == 0);
  CHECK(value("inbox_late_deliveries_total") == 1);
  CHECK(runner.counters().duplicates == 2);  // the in-process view agrees
}

TEST_CASE("two runners sharing one registry show up on one page, one series each") {
  Fixture a, b;
  auto registry = std::make_shared<outbox::metrics::Registry>();
  auto options_a = a.options(), options_b = b.options();
  options_a.metrics = options_b.metrics = registry;
  const auto noop = [](pqxx::transaction_base&, const outbox::Delivery&) {};
  outbox::ConsumerRunner runner_a(options_a, noop), runner_b(options_b, noop);
  MetricsEndpoint endpoint(*registry);
  runner_a.start();
  runner_b.start();
  const auto id = a.publish("x", MessageId::generate_v7().to_string());
  a.publish("x", id);
  b.publish("y", MessageId::generate_v7().to_string());
  REQUIRE(testenv::eventually(10s, [&] {
    return runner_a.counters().duplicates == 1 && runner_b.counters().processed == 1;
  }));
  const auto scraped = endpoint.scrape();
  CHECK(scraped.at("inbox_duplicates_total{consumer=\"" + a.consumer + "\"}") == 1);
  CHECK(scraped.at("inbox_duplicates_total{consumer=\"" + b.consumer + "\"}") == 0);
  CHECK(scraped.at("outbox_consumer_processed_total{consumer=\"" + b.consumer + "\"}") == 1);
}

TEST_CASE("JSON log lines carry consumer, message_id, attempt and reason as fields beside a readable msg") {
  CapturedJsonLog log;
  Fixture f;
  std::atomic<int> calls{0};
  const std::string db_password = "pw-never-logged-3a9f";
  auto options = f.options();
  options.pg_dsn = testenv::pg_dsn() + " password=" + db_password;  // unused by the trusting test server
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base&, const outbox::Delivery& d) {
    if (d.body == "flaky" && ++calls == 1) throw std::runtime_error("gateway timeout");
  });
  runner.start();
  const auto flaky = f.publish("flaky", MessageId::generate_v7().to_string());
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();

  bool found = false;
  for (const auto& j : log.lines()) {
    CHECK(j["msg"].is_string());
    CHECK(j.dump().find(db_password) == std::string::npos);
    if (j.value("message_id", "") != flaky) continue;
    found = true;
    CHECK(j["level"] == "warning");
    CHECK(j["consumer"] == f.consumer);
    CHECK(j["worker"] == 0);
    CHECK(j["attempt"] == 1);
    CHECK(j["reason"] == "gateway timeout");
    CHECK(j["type"] == "TestEvent");
    CHECK(j["msg"].get<std::string>().find("failed try 1/") != std::string::npos);
  }
  CHECK(found);
}
