// The metrics registry and its Prometheus text rendering; durations; RelayMetrics'
// readiness and confirm-latency bookkeeping.
#include "outbox/metrics.h"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "metrics/relay_metrics.h"
#include "outbox/duration.h"
#include "test_text.h"

using namespace relay;
using outbox::metrics::Registry;

namespace {

using testenv::contains;

}  // namespace

TEST_CASE("a counter and a gauge render with HELP, TYPE and their value") {
  Registry r;
  r.counter("x_total", "Things done.").inc(3);
  auto& g = r.gauge("x_level", "A level.");
  g.set(2.5);
  g.add(-1);
  auto text = r.render();
  CHECK(contains(text, "# HELP x_total Things done.\n# TYPE x_total counter\nx_total 3\n"));
  CHECK(contains(text, "# HELP x_level A level.\n# TYPE x_level gauge\nx_level 1.5\n"));
  CHECK(text.find("x_total") < text.find("x_level"));  // registration order
}

TEST_CASE("label values are escaped and series of one family share one HELP") {
  Registry r;
  r.counter("f_total", "Failures.", {{"reason", "a\"b\\c\nd"}}).inc();
  r.counter("f_total", "Failures.", {{"reason", "plain"}}).inc(2);
  auto text = r.render();
  CHECK(contains(text, "f_total{reason=\"a\\\"b\\\\c\\nd\"} 1\n"));
  CHECK(contains(text, "f_total{reason=\"plain\"} 2\n"));
  CHECK(text.find("# HELP f_total") == text.rfind("# HELP f_total"));
}

TEST_CASE("the same name and labels return the same series") {
  Registry r;
  auto& a = r.counter("same_total", "h", {{"k", "v"}});
  auto& b = r.counter("same_total", "h", {{"k", "v"}});
  CHECK(&a == &b);
  CHECK(&a != &r.counter("same_total", "h", {{"k", "w"}}));
}

TEST_CASE("a histogram counts into inclusive cumulative buckets with sum and count") {
  Registry r;
  auto& h = r.histogram("lat_seconds", "Latency.", {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 20.0}) h.observe(v);
  auto text = r.render();
  CHECK(contains(text, "# TYPE lat_seconds histogram\n"));
  CHECK(contains(text, "lat_seconds_bucket{le=\"0.1\"} 2\n"));  // 0.05 and 0.1 (le is inclusive)
  CHECK(contains(text, "lat_seconds_bucket{le=\"1\"} 4\n"));
  CHECK(contains(text, "lat_seconds_bucket{le=\"10\"} 4\n"));
  CHECK(contains(text, "lat_seconds_bucket{le=\"+Inf\"} 5\n"));
  CHECK(contains(text, "lat_seconds_sum 21.65\n"));
  CHECK(contains(text, "lat_seconds_count 5\n"));
}

TEST_CASE("bad names, reserved labels and conflicting definitions are refused") {
  Registry r;
  CHECK_THROWS_AS(r.counter("9starts_with_digit", "h"), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("has-dash", "h"), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("ok_total", "h", {{"le", "1"}}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("ok_total", "h", {{"__x", "1"}}), std::invalid_argument);
  r.counter("taken", "h");
  CHECK_THROWS_AS(r.gauge("taken", "h"), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("taken", "other help"), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("h_seconds", "h", {1, 1}), std::invalid_argument);
}

TEST_CASE("updates from many threads while rendering lose nothing") {
  Registry r;
  auto& c = r.counter("n_total", "n");
  auto& h = r.histogram("v", "v", {1, 2});
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) CHECK(contains(r.render(), "n_total"));
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        c.inc();
        h.observe(1.5);
      }
    });
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  CHECK(c.value() == 80000);
  CHECK(h.snapshot().count == 80000);
  CHECK(h.snapshot().cumulative[1] == 80000);
}

TEST_CASE("durations parse with s, m, h and d and refuse anything else") {
  CHECK(outbox::parse_duration("90s").count() == 90);
  CHECK(outbox::parse_duration("30m").count() == 1800);
  CHECK(outbox::parse_duration("12h").count() == 43200);
  CHECK(outbox::parse_duration("7d").count() == 604800);
  for (const char* bad : {"", "7", "d", "7w", "-1d", "0s", "1.5h", "7 d", "99999999999d"})
    CHECK_THROWS_AS(outbox::parse_duration(bad), std::invalid_argument);
  CHECK(outbox::format_duration(std::chrono::seconds(604800)) == "7d");
  CHECK(outbox::format_duration(std::chrono::seconds(5400)) == "90m");
  CHECK(outbox::format_duration(std::chrono::seconds(61)) == "61s");
}

TEST_CASE("publish-to-confirm latency is observed once per acked tag, multiple acks included") {
  Registry r;
  RelayMetrics m(r, "test");
  for (std::uint64_t tag = 1; tag <= 5; ++tag) m.on_published(tag);
  m.on_acked(3, /*multiple=*/true);  // 1, 2, 3
  m.on_unconfirmed(4, false);        // nacked: no latency sample
  m.on_acked(4, false);              // already settled: ignored
  m.on_acked(5, false);
  auto text = r.render();
  CHECK(contains(text, "outbox_relay_publish_to_confirm_seconds_count 4\n"));
  m.on_published(6);
  m.on_channel_reset();  // the channel's tags are gone: a later ack of 6 means another message
  m.on_acked(6, false);
  CHECK(contains(r.render(), "outbox_relay_publish_to_confirm_seconds_count 4\n"));
  CHECK(contains(text, "outbox_relay_build_info{version=\"test\"} 1\n"));
}

TEST_CASE("readiness needs both connections, no broker block and a recent claim") {
  Registry r;
  RelayMetrics m(r, "test");
  const auto age = std::chrono::seconds(60);
  CHECK(m.not_ready(age).value() == "not connected to PostgreSQL");
  m.set_connected(true, false, false);
  CHECK(m.not_ready(age).value() == "not connected to RabbitMQ");
  m.set_connected(true, true, true);
  CHECK(m.not_ready(age).value() == "RabbitMQ blocks publishing (resource alarm)");
  m.set_connected(true, true, false);
  CHECK(m.not_ready(age).value() == "no claim completed yet");
  m.claimed(0, 0.001);
  CHECK_FALSE(m.not_ready(age).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CHECK(contains(m.not_ready(std::chrono::seconds(1)).value_or(""), "no claim completed and no broker ack for 1 s"));
  // A batch of big rows, still publishing: the broker's acks say the relay is working.
  m.on_acked(1, false);
  CHECK_FALSE(m.not_ready(std::chrono::seconds(1)).has_value());
  CHECK_FALSE(m.not_alive(std::chrono::seconds(60)).has_value());
  CHECK(m.not_alive(std::chrono::seconds(0)).has_value());
}

TEST_CASE("liveness fails after live_max_disconnected_s without a server, naming it, and not when it is 0") {
  Registry r;
  RelayMetrics m(r, "test");
  const auto stall = std::chrono::seconds(60), limit = std::chrono::seconds(1);
  m.set_connected(true, true, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CHECK_FALSE(m.not_alive(stall, limit).has_value());  // connected all along
  m.set_connected(false, true, false);
  CHECK_FALSE(m.not_alive(stall, limit).has_value());  // just lost
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  m.heartbeat();  // the loop turns, retrying: alive by that measure
  CHECK(contains(m.not_alive(stall, limit).value_or(""), "PostgreSQL not connected for 1 s"));
  CHECK_FALSE(m.not_alive(stall).has_value());  // 0: off
  m.set_connected(true, true, false);
  CHECK_FALSE(m.not_alive(stall, limit).has_value());
}

TEST_CASE("the backlog gauges' age is -1 before a measurement and grows until the next one") {
  Registry r;
  RelayMetrics m(r, "test");
  const auto age = [&] {
    const auto text = m.render();
    const std::string name = "\noutbox_relay_backlog_age_seconds ";
    const auto at = text.find(name);
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size()));
  };
  CHECK(age() == -1);
  m.set_backlog(5, 1, 2.5);
  CHECK(age() >= 0);
  CHECK(age() < 0.5);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CHECK(age() >= 1.0);
  m.set_backlog(5, 1, 2.5);
  CHECK(age() < 0.5);
}

TEST_CASE("the first connection of each peer is not a reconnect") {
  Registry r;
  RelayMetrics m(r, "test");
  m.connected_to("postgres");
  m.connected_to("amqp");
  m.connected_to("amqp");
  auto text = r.render();
  CHECK(contains(text, "outbox_relay_reconnects_total{peer=\"postgres\"} 0\n"));
  CHECK(contains(text, "outbox_relay_reconnects_total{peer=\"amqp\"} 1\n"));
}

TEST_CASE("every stage's latency histogram and CPU counter exists from the first scrape; a row is observed in each") {
  Registry r;
  RelayMetrics m(r, "test");
  auto text = r.render();
  for (const char* stage : {"queued", "claim", "publish", "confirm", "settle"})
    CHECK(contains(text, std::string("outbox_relay_stage_seconds_count{stage=\"") + stage + "\"} 0\n"));
  for (const char* stage : {"claim", "decode", "publish", "settle", "mark"})
    CHECK(contains(text, std::string("outbox_relay_stage_cpu_seconds_total{stage=\"") + stage + "\"} 0\n"));
  m.row_stages({0.5, 0.0012, 0.0004, 0.0031, 0.002});
  text = r.render();
  CHECK(contains(text, "outbox_relay_stage_seconds_bucket{stage=\"confirm\",le=\"0.003\"} 0\n"));
  CHECK(contains(text, "outbox_relay_stage_seconds_bucket{stage=\"confirm\",le=\"0.005\"} 1\n"));
  CHECK(contains(text, "outbox_relay_stage_seconds_bucket{stage=\"claim\",le=\"0.0015\"} 1\n"));
  CHECK(contains(text, "outbox_relay_stage_seconds_count{stage=\"queued\"} 1\n"));
  CHECK(contains(text, "outbox_relay_stage_seconds_sum{stage=\"queued\"} 0.5\n"));
  m.stage_cpu()[static_cast<std::size_t>(CpuStage::kDecode)]->inc(0.25);
  CHECK(contains(r.render(), "outbox_relay_stage_cpu_seconds_total{stage=\"decode\"} 0.25\n"));
}
