#pragma once
// PrivateServers: a PostgreSQL and a RabbitMQ of the chaos run's own, which it may
// restart, pause and starve without touching anyone else's servers.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chaos {

// Starts deploy/local/servers.sh on free ports with a fresh folder under /tmp
// (/tmp/outbox-chaos-<pid>-<n>) and stops it again. The shared servers at
// 35432/35673 are never touched: every call names this run's folder and ports.
//
// Cleanup does not depend on this process ending well: start() forks a reaper in
// a session of its own that waits on a pipe; when the driver exits, is killed or
// times out, the pipe closes and the reaper resumes a paused broker, stops both
// servers and removes the folder.
//
// Thread safety: none; the driver's main thread owns it. Not copyable.
class PrivateServers {
 public:
  // `repo`: the source tree holding deploy/local/servers.sh.
  explicit PrivateServers(std::string repo);
  ~PrivateServers();  // stops the servers (through the reaper) and waits for it
  PrivateServers(const PrivateServers&) = delete;
  PrivateServers& operator=(const PrivateServers&) = delete;

  // Throws std::runtime_error (with the script's output) when they do not start.
  void start();

  std::uint16_t pg_port() const { return pg_port_; }
  std::uint16_t amqp_port() const { return amqp_port_; }
  std::string pg_dsn() const;    // direct, not through a proxy
  std::string amqp_uri() const;  // direct, not through a proxy
  const std::string& dir() const { return dir_; }

  // Leaves both servers running after the run (for debugging a failed run).
  void keep_running();
  void restart_rabbitmq();
  void restart_postgres();
  // SIGSTOP / SIGCONT of the broker's Erlang VM.
  void pause_rabbitmq();
  void resume_rabbitmq();
  // rabbitmqctl against this node only; returns its output. Throws when it fails.
  std::string rabbitmqctl(const std::vector<std::string>& args);

 private:
  // Runs servers.sh with this run's settings; throws with its output on failure.
  std::string script(const std::vector<std::string>& args);
  pid_t rabbitmq_pid();
  void start_reaper();

  std::string repo_, dir_;
  std::uint16_t pg_port_ = 0, amqp_port_ = 0;
  int reaper_pipe_ = -1;
  pid_t reaper_ = -1;
  pid_t paused_ = -1;
};

// Runs argv (no shell) with extra environment settings; returns {exit code,
// stdout+stderr}. Used for servers.sh and the relay's own CLI commands.
struct ProcessResult {
  int exit_code = -1;
  std::string output;
};
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env = {});

}  // namespace chaos
