#include "relay_fleet.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace chaos {

RelayFleet::RelayFleet(std::string relay_bin, std::string config_path, std::string dir, int relays)
    : bin_(std::move(relay_bin)), config_(std::move(config_path)), dir_(std::move(dir)), pids_(relays, -1) {}

RelayFleet::~RelayFleet() {
  for (int i = 0; i < size(); ++i)
    if (pids_[i] > 0) kill(i);
}

std::string RelayFleet::log_path(int slot) const { return dir_ + "/relay-" + std::to_string(slot) + ".log"; }

pid_t RelayFleet::spawn(int slot) {
  std::string log = log_path(slot);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    for (int f = 3; f < 1024; ++f) ::close(f);
    ::execl(bin_.c_str(), bin_.c_str(), "run", "--config", config_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void RelayFleet::start_all() {
  for (int i = 0; i < size(); ++i) pids_[i] = spawn(i);
}

bool RelayFleet::running(int slot) { return pids_[slot] > 0; }

void RelayFleet::kill(int slot) {
  if (pids_[slot] <= 0) return;
  ::kill(pids_[slot], SIGKILL);
  int status = 0;
  ::waitpid(pids_[slot], &status, 0);
  pids_[slot] = -1;
}

void RelayFleet::restart(int slot) {
  if (pids_[slot] <= 0) pids_[slot] = spawn(slot);
}

int RelayFleet::reap_unexpected_exits() {
  int n = 0;
  for (int i = 0; i < size(); ++i) {
    if (pids_[i] <= 0) continue;
    int status = 0;
    if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      ++n;
      // How it ended, for the log: a crash names its signal.
      std::fprintf(stderr, "relay %d (pid %d) exited unasked: %s %d\n", i, static_cast<int>(pids_[i]),
                   WIFEXITED(status) ? "exit code" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      pids_[i] = spawn(i);
    }
  }
  return n;
}

std::vector<int> RelayFleet::stop_all(int timeout_s) {
  std::vector<int> codes(pids_.size(), -1);
  for (auto pid : pids_)
    if (pid > 0) ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int i = 0; i < size(); ++i) {
    if (pids_[i] <= 0) continue;
    int status = 0;
    while (true) {
      pid_t r = ::waitpid(pids_[i], &status, WNOHANG);
      if (r == pids_[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pids_[i], SIGKILL);
        ::waitpid(pids_[i], &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pids_[i] = -1;
  }
  return codes;
}

int RelayFleet::count_log_lines(const std::string& needle) const {
  int n = 0;
  for (int i = 0; i < static_cast<int>(pids_.size()); ++i) {
    std::ifstream in(log_path(i));
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace chaos
