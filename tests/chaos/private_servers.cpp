#include "private_servers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <pqxx/pqxx>
#include <random>
#include <stdexcept>
#include <thread>

#include "outbox/pqxx_compat.h"

extern char** environ;

namespace chaos {
namespace {

bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// A port p in [36000, 45000) (OUTBOX_CHAOS_PORT_MIN/MAX narrow it, for a machine
// shared by several runs) such that p .. p+count-1 are free, and their +20000
// (RabbitMQ's Erlang distribution ports) too when `with_dist`, none within `count`
// of `avoid`. Never the shared 35432/35673.
std::uint16_t pick_port(std::mt19937& rng, bool with_dist, int avoid, int count = 1) {
  std::uniform_int_distribution<int> pick(env_int("OUTBOX_CHAOS_PORT_MIN", 36000),
                                          env_int("OUTBOX_CHAOS_PORT_MAX", 45000) - count);
  for (int i = 0; i < 400; ++i) {
    int p = pick(rng);
    bool ok = avoid == 0 || p + count <= avoid || p >= avoid + 3;
    for (int k = 0; ok && k < count; ++k) ok = port_free(p + k) && (!with_dist || port_free(p + k + 20000));
    if (ok) return static_cast<std::uint16_t>(p);
  }
  throw std::runtime_error("no free port for the private servers");
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv_in, const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  auto cargv = c_strings(argv);
  auto cenv = c_strings(env);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");  // no other child inherits it
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ProcessResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

PrivateServers::PrivateServers(std::string repo, ServerLayout layout) : layout_(layout), repo_(std::move(repo)) {
  std::mt19937 rng(std::random_device{}());
  dir_ = "/tmp/outbox-chaos-" + std::to_string(::getpid()) + "-" + std::to_string(rng() % 100000);
  const bool cluster = layout_ == ServerLayout::kCluster;
  amqp_port_ = pick_port(rng, true, 0, cluster ? 3 : 1);
  pg_port_ = pick_port(rng, false, amqp_port_, cluster ? 2 : 1);
}

PrivateServers::~PrivateServers() {
  resume_rabbitmq();
  if (reaper_pipe_ >= 0) ::close(reaper_pipe_);  // the reaper stops the servers now
  if (reaper_ > 0) {
    int status = 0;
    while (::waitpid(reaper_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string PrivateServers::pg_dsn() const {
  if (layout_ == ServerLayout::kCluster)
    return "host=127.0.0.1,127.0.0.1 port=" + std::to_string(pg_port_) + "," + std::to_string(pg_port_ + 1) +
           " user=postgres dbname=postgres target_session_attrs=read-write";
  return "host=127.0.0.1 port=" + std::to_string(pg_port_) + " user=postgres dbname=postgres";
}

std::vector<std::uint16_t> PrivateServers::amqp_ports() const {
  if (layout_ == ServerLayout::kSingle) return {amqp_port_};
  return {amqp_port_, static_cast<std::uint16_t>(amqp_port_ + 1), static_cast<std::uint16_t>(amqp_port_ + 2)};
}

std::string PrivateServers::amqp_uri() const {
  return "amqp://guest:guest@127.0.0.1:" + std::to_string(amqp_port_) + "/%2f";
}

std::string PrivateServers::script(const std::vector<std::string>& args) {
  const bool cluster = layout_ == ServerLayout::kCluster;
  std::vector<std::string> argv = {repo_ + (cluster ? "/deploy/local/cluster.sh" : "/deploy/local/servers.sh")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = cluster
               ? run_process(argv, {"OUTBOX_CLUSTER_DIR=" + dir_, "OUTBOX_CLUSTER_PG_PORT=" + std::to_string(pg_port_),
                                    "OUTBOX_CLUSTER_AMQP_PORT=" + std::to_string(amqp_port_)})
               : run_process(argv, {"OUTBOX_LOCAL_DIR=" + dir_, "OUTBOX_PG_PORT=" + std::to_string(pg_port_),
                                    "OUTBOX_AMQP_PORT=" + std::to_string(amqp_port_)});
  if (r.exit_code != 0)
    throw std::runtime_error(std::string(cluster ? "cluster.sh " : "servers.sh ") + (args.empty() ? "" : args[0]) +
                             " failed (exit " + std::to_string(r.exit_code) + "): " + r.output);
  return r.output;
}

void PrivateServers::start_reaper() {
  // CLOEXEC: the servers started later must not inherit the write end, or the
  // reaper would never see EOF.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::string pid_file = dir_ + "/rabbitmq/rabbitmq.pid";
  reaper_ = ::fork();
  if (reaper_ < 0) throw std::runtime_error("fork failed");
  if (reaper_ == 0) {
    ::setsid();  // outlives a process-group kill of the driver (ctest timeout)
    ::signal(SIGINT, SIG_IGN);
    ::signal(SIGTERM, SIG_IGN);
    ::close(fds[1]);
    int devnull = ::open("/dev/null", O_RDWR);  // hold none of the caller's pipes open
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != fds[0]) ::close(fd);
    char c = 0;
    bool keep = false;
    for (ssize_t n; (n = ::read(fds[0], &c, 1)) != 0;)  // EOF: the driver is done or dead
      if (n == 1 && c == 'k') keep = true;
    if (keep) ::_exit(0);
    std::vector<std::string> cont = {"/bin/sh", "-c", "kill -CONT $(cat '" + pid_file + "') 2>/dev/null; true"};
    run_process(cont);
    script({"stop"});
    run_process({"/bin/rm", "-rf", dir_});
    ::_exit(0);
  }
  ::close(fds[0]);
  reaper_pipe_ = fds[1];
}

void PrivateServers::start() {
  start_reaper();
  script({"start"});
}

void PrivateServers::keep_running() {
  if (reaper_pipe_ >= 0 && ::write(reaper_pipe_, "k", 1) != 1) {
  }
}

void PrivateServers::restart_rabbitmq() {
  resume_rabbitmq();
  script({"restart-rabbitmq"});
}

void PrivateServers::restart_postgres() { script({"restart-postgres"}); }

pid_t PrivateServers::rabbitmq_pid() {
  auto out = script({"rabbitmq-pid"});
  pid_t pid = static_cast<pid_t>(std::atol(out.c_str()));
  if (pid <= 0) throw std::runtime_error("rabbitmq is not running");
  return pid;
}

void PrivateServers::pause_rabbitmq() {
  paused_ = rabbitmq_pid();
  ::kill(paused_, SIGSTOP);
}

void PrivateServers::resume_rabbitmq() {
  if (paused_ > 0) ::kill(paused_, SIGCONT);
  paused_ = -1;
}

std::string PrivateServers::rabbitmqctl(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"rabbitmqctl"};
  a.insert(a.end(), args.begin(), args.end());
  return script(a);
}

}  // namespace chaos

namespace chaos {

void PrivateServers::kill_node(int n) { script({"kill-node", std::to_string(n)}); }
void PrivateServers::stop_node(int n) { script({"stop-node", std::to_string(n)}); }
void PrivateServers::start_node(int n) { script({"start-node", std::to_string(n)}); }
void PrivateServers::pg_failover() { script({"pg-failover"}); }

std::string PrivateServers::node_rabbitmqctl(int n, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"rabbitmqctl", std::to_string(n)};
  a.insert(a.end(), args.begin(), args.end());
  return script(a);
}

std::int64_t PrivateServers::scalar(const std::string& sql) const {
  for (int attempt = 0;; ++attempt) {
    try {
      pqxx::connection conn(pg_dsn());
      pqxx::nontransaction tx(conn);
      return outbox::pgx::exec1(tx, sql)[0].as<std::int64_t>();
    } catch (const pqxx::broken_connection&) {
      if (attempt >= 50) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

}  // namespace chaos
