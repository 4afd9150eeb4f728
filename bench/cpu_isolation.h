#pragma once
// BrokerCpuIsolation: the broker on CPUs of its own for a bench run
// (outbox-bench --broker-cpus LIST).

#include <sched.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "janitor.h"

namespace bench {

// On one machine the relay's and PostgreSQL's CPU is taken from the broker's, so a
// drain can fall short of the broker's ceiling for reasons no relay change can move.
// While this object lives the broker's threads run on `broker_cpus` only, and
// PostgreSQL (the postmaster and every process it started: new backends inherit its
// affinity), this process and the relays it starts run on the other CPUs, in every
// phase: as on separate hosts, each ratio is then to the ceiling of the broker on its
// own CPUs. The destructor gives every one of those processes its affinity back; the
// Janitor does, when the run is killed.
//
// Owns the pinning: not copyable. Not thread-safe (construct before the phases start
// threads).
class BrokerCpuIsolation {
 public:
  // REQUIRES: the broker and PostgreSQL run on this machine, and the right to set
  // their affinity (root or CAP_SYS_NICE). Throws BenchError naming what is missing;
  // nothing stays pinned then.
  BrokerCpuIsolation(const std::vector<long>& broker_cpus, pid_t broker, pid_t postmaster);
  ~BrokerCpuIsolation();
  BrokerCpuIsolation(const BrokerCpuIsolation&) = delete;
  BrokerCpuIsolation& operator=(const BrokerCpuIsolation&) = delete;

  // "broker on CPU 0; PostgreSQL, the bench and the relays on CPU 1".
  const std::string& description() const { return description_; }

  // The postmaster's pid: the parent of `backend` (a session's pg_backend_pid()).
  // Throws BenchError when that backend is not a process of this machine.
  static pid_t postmaster_of(pid_t backend);

  // The Janitor's undo of a "cpus" record: what the destructor would do, from the
  // affinities recorded when the constructor pinned them.
  static std::string restore_recorded(const Janitor::Fields& fields);

 private:
  BrokerCpuIsolation() = default;
  // A process (and, for the postmaster, its children) with the affinity it had.
  struct Pinned {
    pid_t pid;
    bool with_children;
    cpu_set_t original;
  };
  // A thread's own affinity before: the broker binds some of its schedulers to one
  // CPU each (+stbt), and those bindings must come back as they were.
  struct Task {
    pid_t tid;
    cpu_set_t original;
  };
  void pin(pid_t pid, bool with_children, const cpu_set_t& mask, const char* what);
  void restore() noexcept;

  std::vector<Pinned> pinned_;
  std::vector<Task> tasks_;
  std::string description_;
  Janitor::Id record_ = 0;
};

}  // namespace bench
