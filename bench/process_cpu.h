#pragma once
// CPU time of other processes on this machine (/proc), to split the cost of a
// message between the broker, PostgreSQL and the relay. On a shared, busy machine
// CPU per message varies far less than messages per second.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <pqxx/connection>
#include <string>

namespace bench {

// utime + stime of `pid` in seconds; nullopt when it is gone or unreadable.
std::optional<double> process_cpu_seconds(pid_t pid);

// CPU seconds of `pid` and everything it started: its own utime + stime, its reaped
// children's (cutime + cstime: backends and autovacuum workers that already exited)
// and every live child's utime + stime. For the postmaster: the whole PostgreSQL
// server. nullopt when `pid` is gone or unreadable.
std::optional<double> process_tree_cpu_seconds(pid_t pid);

// The resident set of `pid` now (VmRSS), in MiB; nullopt when it is gone.
std::optional<double> process_rss_mib(pid_t pid);

// The parent pid of `pid` (/proc/PID/stat); nullopt when it is gone or unreadable.
std::optional<pid_t> parent_pid(pid_t pid);

// Nanoseconds `pid` has spent on a CPU (/proc/PID/schedstat, first field: exact,
// not sampled at clock ticks like /proc/PID/stat); nullopt when it is gone or unreadable.
std::optional<std::int64_t> process_run_ns(pid_t pid);

// CPU seconds all of this machine's CPUs spent busy (not idle, not waiting for I/O)
// since boot, from /proc/stat; nullopt when unreadable.
std::optional<double> machine_busy_seconds();

// The local RabbitMQ node's pid, from $OUTBOX_LOCAL_DIR/rabbitmq/rabbitmq.pid
// (deploy/local/servers.sh); nullopt when unknown.
std::optional<pid_t> broker_pid();

// CPU of the PostgreSQL backends serving one application_name, sampled while they
// live (a backend's time is lost when it exits, so sample() often). Not thread-safe.
class BackendCpu {
 public:
  // Backends alive now count only their CPU from now on.
  BackendCpu(pqxx::connection& admin, std::string application_name);
  // Records the current CPU of every live backend of the application.
  void sample();
  // Seconds over all backends seen, as of their last sample.
  double total_seconds() const;

 private:
  pqxx::connection& admin_;
  std::string application_name_;
  std::map<int, double> start_;  // backends alive at construction: cpu seconds then
  std::map<int, double> last_;   // backend pid -> cpu seconds at its last sample
};

}  // namespace bench
