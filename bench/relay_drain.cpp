// Relay drain rate: real relay processes emptying a backlog.
#include <algorithm>
#include <chrono>
#include <memory>

#include "measurements.h"
#include "relay_runner.h"

namespace bench {

DrainResult measure_drain(BenchEnv& env, const RelaySpec& spec, long rows, int relays, int bytes) {
  env.fill(rows, bytes);
  const auto yaml = relay_yaml(env.schema(), spec.batch_size, spec.settings);
  // Generous: a broken relay should fail the run, not hang it.
  const auto timeout = std::chrono::milliseconds(60000 + rows);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<RelayRunner>> running;
  for (int i = 0; i < relays; ++i)
    running.push_back(std::make_unique<RelayRunner>(spec.binary, yaml, /*exit_when_idle=*/true));
  DrainResult result;
  double cpu = 0;
  for (auto& relay : running) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + timeout - std::chrono::steady_clock::now());
    auto usage = relay->wait_for(std::max(left, std::chrono::milliseconds(0)));
    if (!usage) throw BenchError("drain: relay still running after " + std::to_string(timeout.count()) +
                                 " ms; log tail:\n" + relay->log_tail());
    if (usage->exit_code != 0)
      throw BenchError("drain: relay exited " + std::to_string(usage->exit_code) + "; log tail:\n" + relay->log_tail());
    cpu += usage->cpu_seconds;
    result.peak_rss_mib = std::max(result.peak_rss_mib, usage->peak_rss_mib);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.msgs_per_s = static_cast<double>(rows) / result.seconds;
  result.cpu_us_per_msg = cpu * 1e6 / static_cast<double>(rows);
  const long pending = env.pending_rows();
  const auto depth = env.queue_depth();
  if (pending != 0 || depth < rows)
    throw BenchError("drain: " + std::to_string(pending) + " rows still pending and " + std::to_string(depth) +
                     " of " + std::to_string(rows) + " messages in the queue after the relays exited");
  env.reset();
  return result;
}

}  // namespace bench
