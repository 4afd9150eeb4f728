// The relay's central promise against hostile rows: one bad message never stops the
// others. Each kind of row a producer in another language or a psql hand fix can
// store is put in the middle of a backlog of good rows and drained by two real
// relays, in both ordering modes; the suite checks that the hostile row alone is
// failed (attempts counted, parked after relay.max_attempts, shown by `dead list`),
// that every good row arrives, with bounded extra copies, no long stall and no lasting
// slowdown, and that the relays never exit.
//
// Runs against a private RabbitMQ node of its own (max_message_size lowered to
// 64 KiB, an internal exchange) and the shared PostgreSQL.
//
// Row counts: the brief's shape is 500 good rows, the hostile row, 500 good rows. But
// two relays drain ~20k msg/s unordered and ~6k msg/s per_key (50 keys) on the
// private broker, so 500 rows take 25-80 ms, a handful of batches: a rate over such a
// window moves by more than 20 % with scheduling noise alone, on a 2-core machine
// shared with builds. For the rate check the suite therefore puts more good rows on
// each side (kUnorderedRowsPerSide, kPerKeyRowsPerSide), enough for rate windows of a
// few hundred milliseconds (tens of batches) before the relays reach the hostile row
// and after it is parked; every other assertion holds at any size, and holds here too.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <vector>

#include "hostile_kinds.h"
#include "hostile_scenario.h"
#include "outbox/pqxx_compat.h"
#include "private_rabbitmq.h"
#include "relay_process.h"
#include "test_env.h"

using hostile::Failure;
using hostile::HostileScenario;
using hostile::ScenarioOptions;
using hostile::ScenarioResult;

namespace {

constexpr int kUnorderedRowsPerSide = 16000;
constexpr int kPerKeyRowsPerSide =
    8000;  // per_key drains ~7 000 msg/s and isolates ~0.5 s: room for a 200 ms+ window after
constexpr int kMaxAttempts = 3;
constexpr int kPublishWindow = 200;
// backoff_initial_ms 25, backoff_max_ms 100 (short, so the hostile row is parked well
// before the backlog runs dry and the rate after it can be measured): a good row may
// wait for a failed batch's retry, never for the hostile row's whole life.
constexpr double kStallBoundMs = 3000;

// The private broker, started once for the binary, with the settings the kinds need.
struct Broker {
  // A message over 64 KiB is refused with a channel close (406). Set at boot: RabbitMQ
  // 4.0 reads it only then (application:set_env on the running node changes nothing).
  testenv::PrivateRabbitMq node{OUTBOX_SERVERS_SH, "max_message_size = 65536"};
  std::string internal_exchange = testenv::unique_name("hostile_internal_x");
  Broker() { node.declare_exchange(internal_exchange, "direct", /*internal=*/true); }
};

Broker& broker() {
  static Broker b;
  return b;
}

// The closing table, printed at exit (the lead copies it into the closing note).
struct Table {
  std::vector<std::string> lines;
  ~Table() {
    std::string text =
        "\nhostile rows: kind | mode | parked after N attempts | good rows published | extra copies | "
        "longest stall ms | rate before/after msg/s\n";
    for (const auto& l : lines) text += l + "\n";
    std::fflush(stdout);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
};
Table& table() {
  static Table t;
  return t;
}

std::string mode_name(const ScenarioOptions& o) {
  return o.ordering == "per_key" ? "per_key/" + o.key_failure_policy : o.ordering;
}

void record(const std::string& kind, const ScenarioOptions& o, const ScenarioResult& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%-32s | %-20s | %s %d | %zu/%zu | %zu | %.0f | %.0f/%.0f%s", kind.c_str(),
                mode_name(o).c_str(),
                !o.hostile_row ? "n/a, attempts"
                : r.parked     ? "parked after"
                               : "NOT parked,",
                r.attempts, r.good_received, r.good_expected, r.extra_copies, r.longest_stall_ms, r.rate_before,
                r.rate_after, r.rate_measurable ? "" : " (window too short)");
  MESSAGE(line << " (drain " << r.drain_s << " s, scenario " << r.scenario_s << " s, rate windows " << r.rate_window_ms
               << " ms; isolation " << r.isolation_ms << " ms at " << r.rate_during << " msg/s)");
  table().lines.push_back(line);
}

bool mentions_any(const std::string& text, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    if (text.find(p) != std::string::npos) return true;
  return false;
}

bool rate_ok(const ScenarioResult& r) { return r.rate_measurable && r.rate_after >= 0.8 * r.rate_before; }

// The rate check, with up to two reruns: on this 2-core machine shared with builds,
// CPU contention from elsewhere moves a window's rate by 20-30 % now and then (the
// control runs show it in both directions). A slowdown the hostile row causes shows
// in every run; contention does not hit the same window three times running.
// A run whose window was too short to measure (the other relay drained most of the
// backlog after the hostile row while it was being isolated: a slow machine, a long
// channel-close recovery) proves nothing either way, so its rerun doubles the good
// rows on each side instead of failing on a window it could not measure.
void check_rate(const std::string& label, const std::string& kind_name, const ScenarioOptions& options,
                const ScenarioResult& first) {
  if (rate_ok(first)) return;
  std::ostringstream tries;
  auto note = [&](const ScenarioOptions& o, const ScenarioResult& r) {
    tries << r.rate_before << "/" << r.rate_after
          << (r.rate_measurable ? "" : " (window " + std::to_string(int(r.rate_window_ms)) + " ms, too short)") << " ["
          << o.rows_per_side << " rows per side]";
  };
  note(options, first);
  ScenarioOptions o = options;
  bool measurable = first.rate_measurable;
  for (int rerun = 1; rerun <= 2; ++rerun) {
    if (!measurable) o.rows_per_side *= 2;
    HostileScenario again(kind_name, broker().internal_exchange, o);
    const auto r = again.run();
    record(label + " (rate rerun)", o, r);
    tries << " then ";
    note(o, r);
    if (rate_ok(r)) return;
    measurable = r.rate_measurable;
  }
  FAIL_CHECK(
      "no run of 3 measured a rate after the hostile row was parked within 80 % of the rate before it: before/after "
      << tries.str() << " msg/s");
}

// Everything a user relies on, for one kind in one mode.
void check_kind(const std::string& kind_name, const ScenarioOptions& options) {
  HostileScenario scenario(kind_name, broker().internal_exchange, options);
  const auto r = scenario.run();
  const auto& kind = scenario.kind();
  record(kind_name, options, r);
  INFO("kind: " << kind_name << ", mode: " << mode_name(options) << ", last_error: " << r.last_error);
  if (!r.parked || !r.in_dead_list || r.missing != 0 || r.relays_running != options.relays) MESSAGE(r.relay_logs);
  // The hostile row alone is failed: attempts counted, parked, the cause named.
  CHECK(r.parked);
  CHECK(r.attempts >= 1);
  CHECK(r.attempts <= options.max_attempts);
  CHECK_MESSAGE(mentions_any(r.last_error, kind.error_mentions), "last_error should name the cause");
  CHECK(r.in_dead_list);
  // Every good row arrives; extra copies only where the broker closed the channel,
  // and then at most one window's worth (once, at the hostile row's first attempt).
  CHECK(r.missing == 0);
  CHECK(r.good_received == r.good_expected);
  CHECK(r.extra_copies <=
        (kind.failure == Failure::kChannelClosed ? std::size_t(options.publish_window) : std::size_t(0)));
  // Both relays are still running: a row never makes a relay exit.
  CHECK(r.relays_running == options.relays);
  CHECK(r.longest_stall_ms < kStallBoundMs);
  // No lasting slowdown: the arrival rate once the hostile row is parked is within
  // 20 % of the rate before the relays reached it.
  check_rate(kind_name, kind_name, options, r);
  // per_key: the hostile row's key behaves as key_failure_policy says.
  if (options.ordering == "per_key" && options.key_failure_policy == "park_key") {
    CHECK(r.held_back > 0);
    CHECK(r.held_published == 0);
    CHECK(r.held_received == 0);
  }
}

ScenarioOptions options_for(const std::string& ordering, const std::string& policy = "park_key") {
  ScenarioOptions o;
  o.ordering = ordering;
  o.key_failure_policy = policy;
  o.rows_per_side = ordering == "per_key" ? kPerKeyRowsPerSide : kUnorderedRowsPerSide;
  o.max_attempts = kMaxAttempts;
  o.publish_window = kPublishWindow;
  return o;
}

// Every kind; OUTBOX_HOSTILE_KINDS=TEXT keeps the kinds whose name contains TEXT
// (to rerun one kind by hand; CI sets nothing and runs all).
std::vector<std::string> kind_names() {
  const char* only = std::getenv("OUTBOX_HOSTILE_KINDS");
  std::vector<std::string> names;
  for (const auto& k : hostile::all_kinds({"x", "rk", "missing", "internal"}))
    if (!only || k.name.find(only) != std::string::npos) names.push_back(k.name);
  return names;
}

}  // namespace

TEST_CASE("invalid UTF-8 in a text or jsonb column is refused at INSERT, so it can never reach the relay") {
  testenv::ScopedSchema schema("hostile_utf8");
  pqxx::connection conn(testenv::pg_dsn());
  const std::string bad = "bad\xff\xfe";
  // Each text column where AMQP needs text (shortstr properties, header names and
  // values), given the invalid bytes as a parameter, the others valid.
  const std::vector<std::pair<std::string, std::string>> columns = {{"exchange", bad},
                                                                    {"routing_key", bad},
                                                                    {"message_type", bad},
                                                                    {"ordering_key", bad},
                                                                    {"content_type", bad},
                                                                    {"correlation_id", bad},
                                                                    {"headers", "{\"a\":\"" + bad + "\"}"},
                                                                    {"headers", "{\"" + bad + "\":\"v\"}"}};
  for (const auto& [column, value] : columns) {
    CAPTURE(column);
    std::vector<std::pair<std::string, std::string>> row = {
        {"exchange", "'x'"},    {"routing_key", "'rk'"},          {"message_type", "'T'"},
        {"ordering_key", "''"}, {"content_type", "'text/plain'"}, {"correlation_id", "NULL"},
        {"headers", "'{}'"}};
    std::string names = "message_id, payload, last_error", values = "gen_random_uuid(), '\\x00', 'legacy row'";
    for (const auto& [name, literal] : row) {
      names += ", " + name;
      values += ", " + (name == column ? std::string(name == "headers" ? "$1::jsonb" : "$1") : literal);
    }
    pqxx::work tx(conn);
    CHECK_THROWS_AS(outbox::pgx::exec_params(tx,
                                             "INSERT INTO \"" + schema.name() + "\".outbox (" + names + ") VALUES (" +
                                                 values + ")",
                                             value),
                    pqxx::data_exception);
  }
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox") == "0");
}

TEST_CASE("since migration 0007 a hostile row without relay state is refused at INSERT by its named CHECK") {
  testenv::ScopedSchema schema("hostile_check");
  pqxx::connection conn(testenv::pg_dsn());
  std::string accepted;
  for (const auto& kind : hostile::all_kinds({"x", "rk", "no_such_x", "internal_x"})) {
    CAPTURE(kind.name);
    pqxx::work tx(conn);
    if (kind.check_constraint.empty()) {
      // What only the broker can refuse (sizes it configures, exchanges, bindings) or
      // no CHECK covers: stored, and the relay's to fail (the suite's cases below).
      try {
        hostile::insert_row(tx, schema.name(), kind.row, "k", /*legacy=*/false);
        accepted += (accepted.empty() ? "" : ", ") + kind.name;
      } catch (const std::exception&) {
      }
      continue;
    }
    try {
      hostile::insert_row(tx, schema.name(), kind.row, "k", /*legacy=*/false);
      FAIL_CHECK("the INSERT was accepted");
    } catch (const pqxx::check_violation& e) {
      CHECK_MESSAGE(std::string(e.what()).find(kind.check_constraint) != std::string::npos, e.what());
    }
  }
  MESSAGE("accepted at INSERT (the relay's to fail): " << accepted);
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox") == "0");
}

TEST_CASE("control: without a hostile row the same backlogs drain completely, once, at a steady rate") {
  broker();
  // Also the rate measurement's own check: without any hostile row it must find the
  // rate after the middle of the backlog within 20 % of the rate before it.
  for (auto options :
       {options_for("unordered"), options_for("per_key", "park_key"), options_for("per_key", "park_message")}) {
    options.hostile_row = false;
    CAPTURE(mode_name(options));
    HostileScenario scenario("unroutable routing key", broker().internal_exchange, options);
    const auto r = scenario.run();
    record("(control: no hostile row)", options, r);
    CHECK(r.missing == 0);
    CHECK(r.extra_copies == 0);
    CHECK(r.relays_running == options.relays);
    CHECK(r.longest_stall_ms < kStallBoundMs);
    check_rate("(control: no hostile row)", "unroutable routing key", options, r);
  }
}

TEST_CASE("unordered: each hostile row is failed alone and parked while the good rows around it all flow") {
  broker();
  for (const auto& name : kind_names()) {
    CAPTURE(name);
    check_kind(name, options_for("unordered"));
  }
}

TEST_CASE("per_key: each hostile row is failed alone, other keys flow, its own key follows key_failure_policy") {
  broker();
  // Both policies, alternating over the kinds: every kind in per_key mode once, both
  // policies for the decode, encode and broker-refusal families, within the time budget.
  bool park_key = true;
  for (const auto& name : kind_names()) {
    CAPTURE(name);
    check_kind(name, options_for("per_key", park_key ? "park_key" : "park_message"));
    park_key = !park_key;
  }
}

// The three reproductions of the bug report, each on one relay with a smaller backlog.
namespace {

ScenarioResult run_reproduction(const std::string& kind_name) {
  auto o = options_for("unordered");
  o.relays = 1;
  o.rows_per_side = 200;
  HostileScenario scenario(kind_name, broker().internal_exchange, o);
  auto r = scenario.run();
  MESSAGE(kind_name << ": parked " << r.parked << " after " << r.attempts << " attempts, " << r.good_received << "/"
                    << r.good_expected << " good rows in " << r.drain_s << " s, " << r.extra_copies << " extra copies, "
                    << r.channel_closes_logged << " channel-close log lines; last_error: " << r.last_error);
  return r;
}

}  // namespace

TEST_CASE(
    "bug 1: a hand-inserted row with headers {\"a\":1} no longer halts every claim; it is parked after max_attempts") {
  const auto r = run_reproduction("headers number value");
  if (!r.parked || r.missing != 0) MESSAGE(r.relay_logs);
  CHECK(r.missing == 0);              // was: nothing after it published
  CHECK(r.attempts == kMaxAttempts);  // was: attempts stayed 0
  CHECK(r.parked);                    // was: never parked
  CHECK(r.last_error.find("headers") != std::string::npos);
  CHECK(r.relays_running == 1);
}

TEST_CASE("bug 2: a header table over the AMQP frame size fails only its own row; neighbours go out once, in seconds") {
  const auto r = run_reproduction("header table over frame size");
  if (!r.parked || r.missing != 0) MESSAGE(r.relay_logs);
  CHECK(r.missing == 0);  // was: 0 published in 45 s
  CHECK(r.drain_s < 10);
  CHECK(r.extra_copies == 0);         // was: neighbours re-sent up to 10 times
  CHECK(r.attempts == kMaxAttempts);  // was: reclaimed without an attempt
  CHECK(r.parked);
  CHECK(r.last_error.find("frame") != std::string::npos);
  CHECK(r.relays_running == 1);
}

TEST_CASE("bug 3: a message over the broker's max message size (406) is attributed and parked, not looped on") {
  const auto r = run_reproduction("message over broker max size");
  if (!r.parked || r.missing != 0) MESSAGE(r.relay_logs);
  CHECK(r.missing == 0);
  CHECK(r.attempts == kMaxAttempts);  // was: attempts 0 forever
  CHECK(r.parked);
  CHECK(r.last_error.find("406") != std::string::npos);
  // Was: ~100 channel closes in 30 s. One close per attempt, a few log lines each.
  CHECK(r.channel_closes_logged <= 4 * kMaxAttempts);
  // Was: neighbours re-delivered a dozen times. At most one window, once.
  CHECK(r.extra_copies <= kPublishWindow);
  CHECK(r.relays_running == 1);
}
