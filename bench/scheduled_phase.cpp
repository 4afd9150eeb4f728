#include "scheduled_phase.h"

#include <iostream>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <unordered_map>

#include "number_text.h"
#include "outbox/outbox_writer.h"
#include "relay_runner.h"
#include "steady_load.h"

namespace bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr auto kScheduleAhead = std::chrono::seconds(2);

struct Run {
  Percentiles ms;  // lateness (scheduled) or latency (unscheduled), milliseconds
  std::size_t early = 0;
};

// One relay, producers at `rate` for `seconds`, each message `ahead` ahead (zero:
// unscheduled). Every message's time from its due time (deliver_at, or its commit)
// to its receipt.
Run measure(BenchEnv& env, const RelaySpec& spec, long rate, double seconds, Clock::duration ahead) {
  env.reset();
  RelayRunner relay(spec.binary, relay_yaml(env.schema(), spec.batch_size, spec.settings), false);
  std::mutex mu;
  std::unordered_map<std::string, std::int64_t> due_us, received_us;
  DeliveryStream stream(env, [&](Delivery&& d) {
    std::lock_guard lock(mu);
    received_us.emplace(d.message_id, unix_us(d.received));
  });
  const SteadyPlan plan = plan_steady(rate, 1);
  const auto length = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> producers;
  std::vector<std::string> errors(static_cast<std::size_t>(plan.producers));
  for (int p = 0; p < plan.producers; ++p)
    producers.emplace_back([&, p] {
      try {
        pqxx::connection conn(env.dsn_for("bench_scheduled_producer"));
        outbox::OutboxWriter writer({env.schema(), {}});
        outbox::Message m;
        m.exchange = outbox::Exchange(env.exchange());
        m.routing_key = outbox::RoutingKey(env.routing_key());
        m.type = outbox::MessageType("BenchScheduled");
        m.payload = std::string(300, 'x');
        const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(plan.producers / plan.tx_rate));
        const auto start = std::chrono::steady_clock::now() + interval * p / plan.producers;
        for (long k = 0;; ++k) {
          const auto at = start + k * interval;
          if (at - start >= length) break;
          std::this_thread::sleep_until(at);
          if (ahead.count() > 0) m.deliver_at = Clock::now() + ahead;
          pqxx::work tx(conn);
          const auto id = writer.enqueue(tx, m).to_string();
          tx.commit();
          const auto due = ahead.count() > 0 ? unix_us(*m.deliver_at) : unix_us(Clock::now());
          std::lock_guard lock(mu);
          due_us.emplace(id, due);
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(p)] = e.what();
      }
    });
  for (auto& t : producers) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw BenchError("scheduled phase: a producer failed: " + e);
  // Everything due by now plus the schedule; then a grace for the last ones.
  const auto deadline = std::chrono::steady_clock::now() + ahead + std::chrono::seconds(30);
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (received_us.size() >= due_us.size()) break;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stream.stop();
  stream.check();
  relay.stop();
  relay.wait_for(std::chrono::seconds(30));
  Run run;
  std::vector<double> ms;
  std::size_t missing = 0;
  for (const auto& [id, due] : due_us) {
    const auto it = received_us.find(id);
    if (it == received_us.end()) {
      ++missing;
      continue;
    }
    const double d = static_cast<double>(it->second - due) / 1000.0;
    if (d < 0 && ahead.count() > 0) ++run.early;
    ms.push_back(d);
  }
  if (missing > 0)
    throw BenchError("scheduled phase: " + std::to_string(missing) + " of " + std::to_string(due_us.size()) +
                     " messages never arrived; relay log: " + relay.log_tail());
  run.ms = percentiles(std::move(ms));
  return run;
}

json to_json(const Percentiles& p) {
  return json{{"p50_ms", p.p50}, {"p99_ms", p.p99}, {"p999_ms", p.p999}, {"max_ms", p.max}, {"count", p.count}};
}

}  // namespace

json run_scheduled_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec) {
  json out = json::array();
  for (long rate : o.scheduled_rates) {
    std::vector<double> late_p99, floor_p99;
    json rounds = json::array();
    for (int r = 0; r < o.repeats; ++r) {
      const Run late = measure(env, spec, rate, o.scheduled_seconds, kScheduleAhead);
      if (late.early > 0)
        throw BenchError("scheduled phase: " + std::to_string(late.early) +
                         " messages arrived before their deliver_at");
      const Run now = measure(env, spec, rate, o.scheduled_seconds, Clock::duration::zero());
      late_p99.push_back(late.ms.p99);
      floor_p99.push_back(now.ms.p99);
      std::cout << "scheduled " << rate << " msg/s, round " << r + 1 << ": lateness p50 " << fmt(late.ms.p50, 1)
                << " p99 " << fmt(late.ms.p99, 1) << " p999 " << fmt(late.ms.p999, 1) << " max " << fmt(late.ms.max, 1)
                << " ms (" << late.ms.count << " messages, none early) | unscheduled latency p50 " << fmt(now.ms.p50, 1)
                << " p99 " << fmt(now.ms.p99, 1) << " ms\n";
      rounds.push_back(json{{"lateness", to_json(late.ms)}, {"unscheduled_latency", to_json(now.ms)}});
    }
    const double lp = median(late_p99), fp = median(floor_p99);
    std::cout << "scheduled " << rate << " msg/s: lateness p99 " << fmt(lp, 1) << " ms (median of " << o.repeats
              << "), " << fmt(lp / fp, 2) << " x the unscheduled latency p99 (" << fmt(fp, 1) << " ms)\n";
    out.push_back(json{{"rate", rate},
                       {"schedule_ahead_s", std::chrono::duration<double>(kScheduleAhead).count()},
                       {"lateness_p99_ms", lp},
                       {"unscheduled_latency_p99_ms", fp},
                       {"ratio_p99", lp / fp},
                       {"rounds", rounds}});
  }
  return out;
}

}  // namespace bench
