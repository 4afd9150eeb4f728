#include "relay_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include "amqp_bench_client.h"

extern char** environ;

namespace bench {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string relay_yaml(const std::string& schema, int batch_size, const std::vector<std::string>& extra) {
  // "postgres.key=value", "amqp.key=value", "http.key=value" and "retention.key=value"
  // go to those sections,
  // "key=value" to relay:.
  auto section = [&](const std::string& name) {
    std::string lines;
    for (const auto& kv : extra) {
      const auto eq = kv.find('=');
      const auto dot = kv.find('.');
      const bool qualified = dot != std::string::npos && dot < eq;
      if ((qualified ? kv.substr(0, dot) : "relay") != name) continue;
      const auto key_start = qualified ? dot + 1 : 0;
      lines += "  " + kv.substr(key_start, eq - key_start) + ": " + kv.substr(eq + 1) + "\n";
    }
    return lines;
  };
  std::ostringstream y;
  y << "postgres:\n  dsn: ${OUTBOX_BENCH_RELAY_DSN}\n  schema: " << schema << "\n"
    << section("postgres") << "amqp:\n  uri: ${OUTBOX_AMQP_URI}\n"
    << section("amqp") << "relay:\n  batch_size: " << batch_size << "\n"
    << section("relay");
  if (const auto http = section("http"); !http.empty()) y << "http:\n" << http;
  if (const auto retention = section("retention"); !retention.empty()) y << "retention:\n" << retention;
  // OUTBOX_BENCH_RELAY_LOG_LEVEL=debug prints each batch's phases (with
  // OUTBOX_BENCH_KEEP_LOGS=1, the logs stay in /tmp to read afterwards).
  const char* level = std::getenv("OUTBOX_BENCH_RELAY_LOG_LEVEL");
  y << "log:\n  level: " << (level && *level ? level : "warn") << "\n";
  return y.str();
}

RelayRunner::RelayRunner(const std::string& relay_bin, const std::string& yaml, bool exit_when_idle) {
  char tmpl[] = "/tmp/outbox-bench-relay-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) throw BenchError("cannot create a temporary relay configuration file");
  config_path_ = tmpl;
  log_path_ = config_path_ + ".log";
  if (::write(fd, yaml.data(), yaml.size()) != static_cast<ssize_t>(yaml.size())) {
    ::close(fd);
    throw BenchError("cannot write " + config_path_);
  }
  ::close(fd);

  std::vector<std::string> args = {relay_bin, "run", "--config", config_path_};
  if (exit_when_idle) args.push_back("--exit-when-idle");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ::unlink(config_path_.c_str());
    ::unlink(log_path_.c_str());
    throw BenchError("cannot start the relay binary " + relay_bin);
  }
  record_ = Janitor::record("relay", {std::to_string(pid_), config_path_, log_path_});
}

RelayRunner::~RelayRunner() {
  if (!usage_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ::unlink(config_path_.c_str());
  if (std::getenv("OUTBOX_BENCH_KEEP_LOGS")) std::cerr << "outbox-bench: relay log kept: " << log_path_ << "\n";
  else ::unlink(log_path_.c_str());
  Janitor::forget(record_);
}

namespace {

// Running and not a zombie: a killed relay whose parent, the bench, died too waits
// as a zombie for init, its sockets already closed.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

}  // namespace

std::string RelayRunner::kill_recorded(const Janitor::Fields& fields) {
  const pid_t pid = static_cast<pid_t>(std::stol(fields.at(0)));
  const std::string& config = fields.at(1);
  std::string did;
  // The pid is ours only while it runs with our configuration file: pids are reused.
  std::ifstream cmdline("/proc/" + fields.at(0) + "/cmdline");
  const std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  if (args.find(config) != std::string::npos && alive(pid) && ::kill(pid, SIGKILL) == 0) {
    // Gone before the schema is dropped: its sessions close with it.
    for (int i = 0; i < 1000 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    did = "killed relay " + fields.at(0) + ", ";
  }
  ::unlink(config.c_str());
  if (!std::getenv("OUTBOX_BENCH_KEEP_LOGS")) ::unlink(fields.at(2).c_str());
  return did + "removed " + config;
}

void RelayRunner::stop() {
  if (!usage_ && pid_ > 0) ::kill(pid_, SIGTERM);
}

void RelayRunner::sample_rss() {
  if (usage_ || pid_ <= 0) return;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) peak_rss_mib_ = std::max(peak_rss_mib_, std::stod(line.substr(6)) / 1024.0);
}

std::optional<RelayUsage> RelayRunner::wait_for(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!usage_) {
    sample_rss();
    int status = 0;
    rusage ru{};
    pid_t r = ::wait4(pid_, &status, WNOHANG, &ru);
    if (r == pid_) {
      RelayUsage u;
      u.exit_code = decode_status(status);
      u.cpu_seconds = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
      u.peak_rss_mib = peak_rss_mib_;
      usage_ = u;
      break;
    }
    if (r < 0) throw BenchError("waiting for relay process " + std::to_string(pid_) + " failed");
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return usage_;
}

std::string RelayRunner::log_tail(std::size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  std::string all = s.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace bench
