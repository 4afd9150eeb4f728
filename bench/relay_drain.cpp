// Relay drain rate: real relay processes emptying a backlog.
#include <algorithm>
#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <thread>

#include "measurements.h"
#include "process_cpu.h"
#include "relay_runner.h"

namespace bench {

DrainResult measure_drain(BenchEnv& env, const RelaySpec& spec, long rows, int relays, int bytes) {
  env.fill(rows, bytes);
  const auto yaml = relay_yaml(env.schema(), spec.batch_size, spec.settings);
  // Generous: a broken relay should fail the run, not hang it.
  const auto timeout = std::chrono::milliseconds(60000 + rows);
  BackendCpu pg_cpu(env.admin(), env.relay_application_name());
  const auto broker = broker_pid();
  const double broker_cpu0 = broker ? process_cpu_seconds(*broker).value_or(0) : 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<RelayRunner>> running;
  for (int i = 0; i < relays; ++i)
    running.push_back(std::make_unique<RelayRunner>(spec.binary, yaml, /*exit_when_idle=*/true));
  DrainResult result;
  double cpu = 0;
  for (std::size_t done = 0, round = 0; done < running.size(); ++round) {
    if (round % 5 == 0) pg_cpu.sample();  // backends take their CPU time with them when they exit
    done = 0;
    for (auto& relay : running) {
      auto usage = relay->wait_for(std::chrono::milliseconds(0));
      if (!usage) continue;
      ++done;
      if (usage->exit_code != 0)
        throw BenchError("drain: relay exited " + std::to_string(usage->exit_code) + "; log tail:\n" +
                         relay->log_tail());
    }
    if (std::chrono::steady_clock::now() - start > timeout)
      throw BenchError("drain: relay still running after " + std::to_string(timeout.count()) +
                       " ms; log tail:\n" + running.front()->log_tail());
    if (done < running.size()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& relay : running) {
    auto usage = relay->wait_for(std::chrono::milliseconds(0));
    cpu += usage->cpu_seconds;
    result.peak_rss_mib = std::max(result.peak_rss_mib, usage->peak_rss_mib);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.msgs_per_s = static_cast<double>(rows) / result.seconds;
  result.cpu_us_per_msg = cpu * 1e6 / static_cast<double>(rows);
  result.pg_cpu_us_per_msg = pg_cpu.total_seconds() * 1e6 / static_cast<double>(rows);
  if (broker)
    result.broker_cpu_us_per_msg =
        (process_cpu_seconds(*broker).value_or(0) - broker_cpu0) * 1e6 / static_cast<double>(rows);
  const long pending = env.pending_rows();
  const auto depth = env.queue_depth();
  if (pending != 0 || depth < rows)
    throw BenchError("drain: " + std::to_string(pending) + " rows still pending and " + std::to_string(depth) +
                     " of " + std::to_string(rows) + " messages in the queue after the relays exited");
  {
    pqxx::nontransaction tx(env.admin());
    const double span = tx.exec1("SELECT coalesce(extract(epoch from max(published_at) - min(published_at)), 0) "
                                 "FROM \"" + env.schema() + "\".outbox WHERE id > " +
                                 std::to_string(env.history_max_id()))[0].as<double>();
    const long after_first = rows - std::min<long>(rows, spec.batch_size);
    result.steady_msgs_per_s = span > 0 ? static_cast<double>(after_first) / span : result.msgs_per_s;
  }
  env.reset();
  return result;
}

}  // namespace bench
