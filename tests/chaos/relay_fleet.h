#pragma once
// RelayFleet: the outbox-relay processes of a chaos run, killed and restarted at will.

#include <sys/types.h>

#include <string>
#include <vector>

namespace chaos {

// N slots, each running `outbox-relay run --config FILE` as a child process whose
// log (stderr) is appended to <dir>/relay-<slot>.log across restarts. Children get
// SIGKILL when the driver dies (PR_SET_PDEATHSIG), so no relay outlives a run.
//
// Thread safety: none; the driver's main thread owns it. Not copyable.
class RelayFleet {
 public:
  RelayFleet(std::string relay_bin, std::string config_path, std::string dir, int relays);
  ~RelayFleet();  // SIGKILLs what still runs
  RelayFleet(const RelayFleet&) = delete;
  RelayFleet& operator=(const RelayFleet&) = delete;

  void start_all();
  int size() const { return static_cast<int>(pids_.size()); }
  bool running(int slot);
  // SIGKILL and reap; the slot stays down until restart().
  void kill(int slot);
  void restart(int slot);
  // Collects exits of relays that ended by themselves (they must not): returns how
  // many had exited since the last call and restarts them.
  int reap_unexpected_exits();
  // SIGTERM to all, waits up to `timeout_s`; returns the exit codes (128+signal
  // when killed, -1 when it had to be SIGKILLed).
  std::vector<int> stop_all(int timeout_s);
  // Lines of all relay logs containing `needle`.
  int count_log_lines(const std::string& needle) const;
  std::string log_path(int slot) const;

 private:
  pid_t spawn(int slot);

  std::string bin_, config_, dir_;
  std::vector<pid_t> pids_;
};

}  // namespace chaos
