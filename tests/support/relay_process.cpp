#include "relay_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "test_env.h"

extern char** environ;

namespace testenv {

std::string write_temp_file(const std::string& text, const std::string& suffix) {
  std::string path = "/tmp/" + unique_name("outbox_test") + suffix;
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string relay_config_yaml(const std::string& schema, const std::string& extra_relay) {
  std::ostringstream y;
  y << "postgres:\n  dsn: ${OUTBOX_PG_DSN}\n  schema: " << schema << "\n"
    << "amqp:\n  uri: ${OUTBOX_AMQP_URI}\n  heartbeat_s: 5\n  confirm_timeout_ms: 10000\n"
    << "relay:\n";
  // A key in extra_relay replaces the default: the relay refuses a key given twice.
  const std::pair<const char*, const char*> defaults[] = {{"batch_size", "500"},
                                                          {"poll_interval_ms", "50"},
                                                          {"summary_interval_s", "2"},
                                                          {"backoff_initial_ms", "200"},
                                                          {"backoff_max_ms", "2000"}};
  for (const auto& [key, value] : defaults)
    if (("\n" + extra_relay).find(std::string("\n  ") + key + ":") == std::string::npos)
      y << "  " << key << ": " << value << "\n";
  y << extra_relay << "log:\n  level: debug\n";
  return y.str();
}

namespace {

pid_t spawn(const std::vector<std::string>& args, const std::string& out_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Nothing of the test's own (a proxy's sockets, another relay's connection) stays
  // open in the relay: a connection the test cuts must close for its peer.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
  return pid;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

RelayProcess::RelayProcess(const std::string& yaml, bool exit_when_idle) {
  config_path_ = write_temp_file(yaml);
  log_path_ = config_path_ + ".log";
  std::vector<std::string> args = {OUTBOX_RELAY_BIN, "run", "--config", config_path_};
  if (exit_when_idle) args.push_back("--exit-when-idle");
  pid_ = spawn(args, log_path_);
}

RelayProcess::~RelayProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  ::unlink(config_path_.c_str());
  ::unlink(log_path_.c_str());
}

void RelayProcess::signal(int sig) {
  if (pid_ > 0 && status_ < 0) ::kill(pid_, sig);
}

int RelayProcess::wait() {
  if (status_ < 0) {
    int status = 0;
    if (waitpid(pid_, &status, 0) == pid_) status_ = status;
  }
  return decode_status(status_);
}

bool RelayProcess::running() {
  if (status_ >= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = status;
    return false;
  }
  return r == 0;
}

std::string RelayProcess::log() const { return read_file(log_path_); }

CommandResult run_relay_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {OUTBOX_RELAY_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

CommandResult run_command(const std::vector<std::string>& argv) {
  std::string out_path = write_temp_file("", ".out");
  pid_t pid = spawn(argv, out_path);
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r{decode_status(status), read_file(out_path)};
  ::unlink(out_path.c_str());
  return r;
}

}  // namespace testenv
