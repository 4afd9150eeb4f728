// Relay drain rate: real relay processes emptying a backlog.
#include <algorithm>
#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <thread>

#include "measurements.h"
#include "outbox/pqxx_compat.h"
#include "process_cpu.h"
#include "relay_runner.h"

namespace bench {
namespace {

using Relays = std::vector<std::unique_ptr<RelayRunner>>;
using Clock = std::chrono::steady_clock;

// Throws when a relay exited with a failure; returns how many exited.
std::size_t count_exited(Relays& running) {
  std::size_t done = 0;
  for (auto& relay : running) {
    auto usage = relay->wait_for(std::chrono::milliseconds(0));
    if (!usage) continue;
    ++done;
    if (usage->exit_code != 0)
      throw BenchError("drain: relay exited " + std::to_string(usage->exit_code) + "; log tail:\n" + relay->log_tail());
  }
  return done;
}

// Waits until the plan's end: every relay exited (exit_when_idle), or nothing pending.
void await_drained(BenchEnv& env, Relays& running, const DrainPlan& plan, BackendCpu& pg_cpu) {
  // Generous: a broken relay should fail the run, not hang it.
  const auto timeout = std::chrono::milliseconds(60000 + plan.rows);
  const auto start = Clock::now();
  for (std::size_t round = 0;; ++round) {
    if (round % 5 == 0) pg_cpu.sample();  // backends take their CPU time with them when they exit
    const std::size_t exited = count_exited(running);
    if (plan.exit_when_idle ? exited == running.size() : !env.any_pending()) return;
    if (!plan.exit_when_idle && exited > 0)
      throw BenchError("drain: a relay exited before the backlog was drained; log tail:\n" +
                       running.front()->log_tail());
    if (Clock::now() - start > timeout)
      throw BenchError("drain: backlog not drained after " + std::to_string(timeout.count()) + " ms; log tail:\n" +
                       running.front()->log_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// SIGTERM to relays still running; each must exit 0 within 30 s.
void stop_all(Relays& running) {
  for (auto& relay : running) relay->stop();
  for (auto& relay : running) {
    auto usage = relay->wait_for(std::chrono::seconds(30));
    if (!usage || usage->exit_code != 0)
      throw BenchError("drain: a relay did not stop cleanly on SIGTERM; log tail:\n" + relay->log_tail());
  }
}

}  // namespace

DrainResult measure_drain(BenchEnv& env, const RelaySpec& spec, const DrainPlan& plan) {
  env.fill(plan.rows, plan.bytes, /*published=*/false, plan.keys);
  const auto yaml = relay_yaml(env.schema(), spec.batch_size, spec.settings);
  BackendCpu pg_cpu(env.admin(), env.relay_application_name());
  const auto broker = broker_pid();
  const double broker_cpu0 = broker ? process_cpu_seconds(*broker).value_or(0) : 0;
  const auto start = Clock::now();
  Relays running;
  for (int i = 0; i < plan.relays; ++i)
    running.push_back(std::make_unique<RelayRunner>(spec.binary, yaml, plan.exit_when_idle));
  await_drained(env, running, plan, pg_cpu);
  DrainResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& relay : running) relay->sample_rss();
  stop_all(running);
  const auto rows = static_cast<double>(plan.rows);
  double cpu = 0;
  for (auto& relay : running) {
    auto usage = relay->wait_for(std::chrono::milliseconds(0));
    cpu += usage->cpu_seconds;
    result.peak_rss_mib = std::max(result.peak_rss_mib, usage->peak_rss_mib);
  }
  result.msgs_per_s = rows / result.seconds;
  result.cpu_us_per_msg = cpu * 1e6 / rows;
  result.pg_cpu_us_per_msg = pg_cpu.total_seconds() * 1e6 / rows;
  if (broker) result.broker_cpu_us_per_msg = (process_cpu_seconds(*broker).value_or(0) - broker_cpu0) * 1e6 / rows;
  const long pending = env.pending_rows();
  const auto depth = env.queue_depth();
  if (pending != 0 || depth < plan.rows)
    throw BenchError("drain: " + std::to_string(pending) + " rows still pending and " + std::to_string(depth) + " of " +
                     std::to_string(plan.rows) + " messages in the queue after the relays exited");
  {
    pqxx::nontransaction tx(env.admin());
    const double span =
        outbox::pgx::exec1(tx,
                           "SELECT coalesce(extract(epoch from max(published_at) - min(published_at)), 0) "
                           "FROM \"" +
                               env.schema() + "\".outbox WHERE id > " + std::to_string(env.history_max_id()))[0]
            .as<double>();
    const long after_first = plan.rows - std::min<long>(plan.rows, spec.batch_size);
    result.steady_msgs_per_s = span > 0 ? static_cast<double>(after_first) / span : result.msgs_per_s;
  }
  env.reset();
  return result;
}

}  // namespace bench
