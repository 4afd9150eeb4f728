#include "hostile_scenario.h"

#include <signal.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_set>

#include "arrival_log.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

namespace hostile {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string key_of(int i, int keys) { return "key-" + std::to_string(i % keys); }
constexpr int kHostileKey = 3;

// Good rows i in [first, first + count), through the SDK, in `tx`.
std::vector<std::string> enqueue_good(pqxx::work& tx, const std::string& schema, const Targets& t, int first, int count,
                                      int keys) {
  outbox::OutboxWriter writer({schema, {}});
  std::vector<outbox::Message> batch;
  for (int i = first; i < first + count; ++i) {
    outbox::Message m;
    m.exchange = outbox::Exchange(t.exchange);
    m.routing_key = outbox::RoutingKey(t.routing_key);
    m.type = outbox::MessageType("Good");
    m.ordering_key = key_of(i, keys);
    m.payload = "{\"i\":" + std::to_string(i) + "}";
    batch.push_back(std::move(m));
  }
  std::vector<std::string> ids;
  for (const auto& id : writer.enqueue_batch(tx, batch)) ids.push_back(id.to_string());
  return ids;
}

std::string tail(const std::string& text, std::size_t n) {
  return text.size() > n ? text.substr(text.size() - n) : text;
}

// Longest gap between consecutive times, from `start` on; `times` sorted.
double longest_gap_ms(Clock::time_point start, const std::vector<Clock::time_point>& times) {
  double longest = 0;
  for (auto t : times) {
    longest = std::max(longest, ms_between(start, t));
    start = t;
  }
  return longest;
}

// The median of `slices` arrival rates (msg/s) over [from, from + window).
double median_rate(const std::vector<Clock::time_point>& times, Clock::time_point from, Clock::duration window) {
  constexpr int slices = 5;
  const auto slice = window / slices;
  std::vector<double> rates;
  for (int i = 0; i < slices; ++i) {
    const auto a = from + i * slice, b = a + slice;
    auto n = std::count_if(times.begin(), times.end(), [&](auto t) { return t >= a && t < b; });
    rates.push_back(n / std::chrono::duration<double>(slice).count());
  }
  std::nth_element(rates.begin(), rates.begin() + slices / 2, rates.end());
  return rates[slices / 2];
}

// Arrival rates in two equal windows: one ending when the relays reached the hostile
// row (`reached`), one starting when it was parked (`resumed`), each as long as the
// shorter of the two stretches the backlog kept the relays busy on either side. In
// between, the relays are isolating and retrying the row (bounded by the stall check
// and reported as `rate_during`); the promise is that the rate is back afterwards.
// The first and last 5 % of arrivals are left out: the relays ramp up at the start
// (and the second one joins) and run dry at the end, which would bias whichever
// window touches an edge. Each window's rate is the median of five slices, so a burst
// of CPU contention from elsewhere on a shared machine moves one slice, not the verdict.
void measure_rates(const std::vector<Clock::time_point>& times, Clock::time_point reached, Clock::time_point resumed,
                   ScenarioResult& r) {
  if (times.size() < 40) return;
  resumed = std::max(resumed, reached);
  const auto busy_from = times[times.size() / 20], busy_to = times[times.size() - 1 - times.size() / 20];
  if (reached <= busy_from || resumed >= busy_to) return;
  const auto window = std::min(reached - busy_from, busy_to - resumed);
  r.rate_window_ms = std::chrono::duration<double, std::milli>(window).count();
  // Below this a slice holds too few batches (of 100) for a rate within 20 %.
  r.rate_measurable = r.rate_window_ms >= 200;
  r.rate_before = median_rate(times, reached - window, window);
  r.rate_after = median_rate(times, resumed, window);
  r.isolation_ms = ms_between(reached, resumed);
  const auto during = std::count_if(times.begin(), times.end(), [&](auto t) { return t >= reached && t < resumed; });
  if (resumed > reached) r.rate_during = during / std::chrono::duration<double>(resumed - reached).count();
}

}  // namespace

HostileScenario::HostileScenario(std::string kind_name, std::string internal_exchange, ScenarioOptions options)
    : kind_name_(std::move(kind_name)),
      internal_exchange_(std::move(internal_exchange)),
      options_(std::move(options)) {}

std::string HostileScenario::relay_yaml(const std::string& schema) const {
  std::ostringstream y;
  y << "postgres:\n  dsn: ${OUTBOX_PG_DSN}\n  schema: " << schema << "\n"
    << "amqp:\n  uri: ${OUTBOX_AMQP_URI}\n  heartbeat_s: 5\n  confirm_timeout_ms: 5000\n"
    << "  publish_window: " << options_.publish_window << "\n"
    << "relay:\n  batch_size: 100\n  poll_interval_ms: 50\n  summary_interval_s: 2\n"
    << "  max_attempts: " << options_.max_attempts << "\n  backoff_initial_ms: 25\n  backoff_max_ms: 100\n"
    << "  ordering: " << options_.ordering << "\n";
  if (options_.ordering == "per_key")
    y << "  lanes: 16\n  rebalance_interval_ms: 300\n  key_failure_policy: " << options_.key_failure_policy << "\n";
  y << "log:\n  level: info\n";
  return y.str();
}

ScenarioResult HostileScenario::run() {
  const auto scenario_start = Clock::now();
  testenv::ScopedSchema schema("hostile");
  testenv::TestBroker broker("hostile");
  const Targets targets{broker.exchange(), broker.routing_key(), testenv::unique_name("hostile_missing_x"),
                        internal_exchange_};
  kind_ = kind_named(targets, kind_name_);
  const std::string yaml = relay_yaml(schema.name());
  const std::string table = "\"" + schema.name() + "\".outbox";

  const auto relays_started = Clock::now();
  std::vector<std::unique_ptr<testenv::RelayProcess>> relays;
  for (int i = 0; i < options_.relays; ++i) relays.push_back(std::make_unique<testenv::RelayProcess>(yaml));

  // One transaction: the relays meet the whole backlog at once, the hostile row in
  // the middle by id.
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  const int n = options_.rows_per_side;
  auto before = enqueue_good(tx, schema.name(), targets, 0, n, options_.keys);
  long long hostile_id = 0;
  std::string hostile_message_id;
  // By hand, as a producer without the SDK would; as a legacy row (last_error set), as
  // stored before migration 0007, whose CHECK constraints would refuse most kinds.
  if (options_.hostile_row)
    std::tie(hostile_id, hostile_message_id) = insert_row(tx, schema.name(), kind_.row,
                                                          key_of(kHostileKey, options_.keys), /*legacy=*/true);
  auto after = enqueue_good(tx, schema.name(), targets, n, n, options_.keys);

  // park_key: the hostile row's later key-mates wait behind it for good.
  const bool park_key = options_.hostile_row && options_.ordering == "per_key" &&
                        options_.key_failure_policy == "park_key";
  std::unordered_set<std::string> expected(before.begin(), before.end()), held;
  for (int i = 0; i < n; ++i) (park_key && (n + i) % options_.keys == kHostileKey ? held : expected).insert(after[i]);

  ScenarioResult r;
  r.good_expected = expected.size();
  r.held_back = held.size();
  ArrivalLog log(broker, expected);
  // Give the relays time to connect (and per_key relays to share the lanes: the
  // rebalance interval is 300 ms), so the drain is measured at its steady pace.
  std::this_thread::sleep_until(relays_started + std::chrono::milliseconds(options_.ordering == "per_key" ? 800 : 300));
  tx.commit();
  const auto committed = Clock::now();

  // Until every expected good row arrived and the hostile row is parked.
  pqxx::nontransaction watch(conn);
  // When the hostile row was first seen parked (polled every 5 ms); the control run
  // has none, and its rate "after" starts where the hostile row would have been.
  auto parked_seen = committed;
  while (Clock::now() - committed < options_.limit) {
    if (options_.hostile_row && !r.parked) {
      r.parked = watch
                     .exec("SELECT parked_at IS NOT NULL FROM " + table +
                           " WHERE id = " + std::to_string(hostile_id))[0][0]
                     .as<bool>();
      if (r.parked) parked_seen = Clock::now();
    }
    if ((r.parked || !options_.hostile_row) && log.expected_arrived() >= expected.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Late copies (and, with park_key, held rows that should not come) have time to show.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  log.stop();

  for (auto& relay : relays) r.relays_running += relay->running() ? 1 : 0;
  if (options_.hostile_row) {
    auto dead = testenv::run_relay_command({"dead", "list", "--config", testenv::write_temp_file(yaml)});
    r.in_dead_list = dead.exit_code == 0 && dead.output.find(std::to_string(hostile_id)) != std::string::npos &&
                     dead.output.find(hostile_message_id) != std::string::npos;
    if (!r.in_dead_list)
      r.relay_logs += "dead list (exit " + std::to_string(dead.exit_code) + "):\n" + tail(dead.output, 2000) + "\n";
  }
  for (auto& relay : relays) {
    relay->signal(SIGTERM);
    relay->wait();
    const auto text = relay->log();
    r.channel_closes_logged += testenv::lines_with(text, "channel closed");
    r.relay_logs += "--- relay log (tail) ---\n" + tail(text, 3000) + "\n";
  }
  if (!log.error().empty()) r.relay_logs += "consumer failed: " + log.error() + "\n";

  if (options_.hostile_row) {
    auto row = watch.exec("SELECT attempts, parked_at IS NOT NULL, coalesce(last_error, '') FROM " + table +
                          " WHERE id = " + std::to_string(hostile_id))[0];
    r.attempts = row[0].as<int>();
    r.parked = row[1].as<bool>();
    r.last_error = row[2].c_str();
  }
  r.held_published = held.empty() ? 0
                                  : watch
                                        .exec("SELECT count(*) FROM " + table + " WHERE ordering_key = '" +
                                              key_of(kHostileKey, options_.keys) + "' AND id > " +
                                              std::to_string(hostile_id) + " AND published_at IS NOT NULL")[0][0]
                                        .as<std::size_t>();

  std::vector<Clock::time_point> firsts;
  for (const auto& [id, times] : log.arrivals()) {
    if (id == hostile_message_id) r.hostile_deliveries += times.size();
    if (held.count(id)) r.held_received += times.size();
    if (!expected.count(id)) continue;
    r.extra_copies += times.size() - 1;
    firsts.push_back(times.front());
  }
  r.good_received = firsts.size();
  r.missing = expected.size() - firsts.size();
  std::sort(firsts.begin(), firsts.end());
  r.longest_stall_ms = longest_gap_ms(committed, firsts);
  if (!firsts.empty()) r.drain_s = ms_between(committed, firsts.back()) / 1000.0;
  // The moment the relays reached the hostile row's place in the backlog: the median
  // first arrival of the 400 good rows nearest to it by id (in per_key mode too, rows
  // near in id are of the same round over the keys). Rows of its own batch (100) may
  // be delayed by its failure, e.g. republished one at a time; being a minority of
  // the 400, they do not move the median.
  std::vector<Clock::time_point> near;
  auto add_near = [&](const std::string& id) {
    auto it = log.arrivals().find(id);
    if (it != log.arrivals().end() && expected.count(id)) near.push_back(it->second.front());
  };
  for (int i = std::max(0, n - 200); i < n; ++i) add_near(before[i]);
  for (int i = 0; i < std::min(n, 200); ++i) add_near(after[i]);
  if (!near.empty()) {
    std::nth_element(near.begin(), near.begin() + near.size() / 2, near.end());
    measure_rates(firsts, near[near.size() / 2], parked_seen, r);
  }
  r.scenario_s = ms_between(scenario_start, Clock::now()) / 1000.0;
  return r;
}

}  // namespace hostile
