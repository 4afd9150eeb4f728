#pragma once
// PrivateServers: a PostgreSQL and a RabbitMQ of the chaos run's own, which it may
// restart, pause and starve without touching anyone else's servers.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chaos {

// kSingle: one PostgreSQL and one RabbitMQ node (deploy/local/servers.sh).
// kCluster: a 3-node RabbitMQ cluster and a PostgreSQL primary with a streaming
// standby (deploy/local/cluster.sh); ports are the first node's and the primary's,
// the others follow them (+1, +2).
enum class ServerLayout { kSingle, kCluster };

// Starts deploy/local/servers.sh (or cluster.sh) on free ports with a fresh folder under /tmp
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
  explicit PrivateServers(std::string repo, ServerLayout layout = ServerLayout::kSingle);
  ~PrivateServers();  // stops the servers (through the reaper) and waits for it
  PrivateServers(const PrivateServers&) = delete;
  PrivateServers& operator=(const PrivateServers&) = delete;

  // Throws std::runtime_error (with the script's output) when they do not start.
  void start();

  std::uint16_t pg_port() const { return pg_port_; }
  std::uint16_t amqp_port() const { return amqp_port_; }
  // Direct, not through a proxy. kCluster: both servers, target_session_attrs=read-write.
  std::string pg_dsn() const;
  // One SQL statement on this run's PostgreSQL (the primary, by the DSN), its single
  // integer. Retries for 10 s on a lost connection: a restarting server, a failover.
  std::int64_t scalar(const std::string& sql) const;
  std::string amqp_uri() const;  // direct, not through a proxy; kCluster: node 1
  // Every node's AMQP port (one for kSingle).
  std::vector<std::uint16_t> amqp_ports() const;
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

  // kCluster only, node n = 1..3: SIGKILL of its Erlang VM, a clean stop, a start
  // (it rejoins the cluster); rabbitmqctl against that node.
  void kill_node(int n);
  void stop_node(int n);
  void start_node(int n);
  std::string node_rabbitmqctl(int n, const std::vector<std::string>& args);
  // kCluster only: immediate stop of the primary, promotion of the standby.
  void pg_failover();

 private:
  // Runs servers.sh with this run's settings; throws with its output on failure.
  std::string script(const std::vector<std::string>& args);
  pid_t rabbitmq_pid();
  void start_reaper();

  ServerLayout layout_;
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
ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});

}  // namespace chaos
