#pragma once
// RelayRunner: one outbox-relay process started by the bench, with its resource use.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "janitor.h"

namespace bench {

// What the kernel accounted to a relay process that ended (wait4).
struct RelayUsage {
  int exit_code = -1;      // 128+signal when killed
  double cpu_seconds = 0;  // user + system
  // The relay's own peak RSS (VmHWM), sampled while it ran. Not ru_maxrss: a child
  // started with posix_spawn (vfork) inherits the parent's high-water mark at exec.
  double peak_rss_mib = 0;
};

// Writes the configuration to a temporary file and runs
// `outbox-relay run --config FILE [--exit-when-idle]`, its log captured to a file.
// The destructor kills a still running relay and removes both files; the Janitor
// does, when the run is killed.
// Thread safety: none. Owns a child process: not copyable.
class RelayRunner {
 public:
  RelayRunner(const std::string& relay_bin, const std::string& yaml, bool exit_when_idle);
  ~RelayRunner();
  RelayRunner(const RelayRunner&) = delete;
  RelayRunner& operator=(const RelayRunner&) = delete;

  // Sends SIGTERM: the relay finishes its batches in flight and exits 0.
  void stop();
  // Reads the relay's VmHWM (its peak RSS so far); wait_for() does it too.
  void sample_rss();
  // Polls for the exit until `timeout`; nullopt if still running.
  std::optional<RelayUsage> wait_for(std::chrono::milliseconds timeout);
  bool exited() const { return usage_.has_value(); }
  // The last `bytes` of the log, for an error report.
  std::string log_tail(std::size_t bytes = 2000) const;
  pid_t pid() const { return pid_; }

  // The Janitor's undo of a "relay" record {pid, config file, log file}: SIGKILL to
  // the pid if it still runs with that configuration, then both files removed (the
  // log kept with OUTBOX_BENCH_KEEP_LOGS).
  static std::string kill_recorded(const Janitor::Fields& fields);

 private:
  std::string config_path_, log_path_;
  pid_t pid_ = -1;
  std::optional<RelayUsage> usage_;
  double peak_rss_mib_ = 0;
  Janitor::Id record_ = 0;
};

// The relay configuration the bench uses: its schema, the relays' DSN and the
// broker from the environment (OUTBOX_BENCH_RELAY_DSN, OUTBOX_AMQP_URI), quiet logs,
// `batch_size`, and `extra` lines ("key=value") in the relay: section (or, as
// "postgres.", "amqp.", "http.", "retention.key=value", in that one).
std::string relay_yaml(const std::string& schema, int batch_size, const std::vector<std::string>& extra);

}  // namespace bench
