#include "loopback_blackhole.h"

#include <spawn.h>
#include <sys/wait.h>

#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace testenv {
namespace {

// Runs iptables with `args` (no shell); its exit status, or -1 when it cannot start.
int iptables(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"/usr/sbin/iptables", "-w", "5"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

LoopbackBlackhole::LoopbackBlackhole(int port) : port_(port) {
  rules("-I");
  active_ = true;
}

LoopbackBlackhole::~LoopbackBlackhole() {
  try {
    heal();
  } catch (...) {
    // A destructor must not throw; a rule left behind names a port of this test only.
  }
}

void LoopbackBlackhole::heal() {
  if (!active_) return;
  active_ = false;
  rules("-D");
}

void LoopbackBlackhole::rules(const char* action) {
  const auto port = std::to_string(port_);
  for (const char* direction : {"--dport", "--sport"}) {
    const int rc = iptables({action, "INPUT", "-i", "lo", "-p", "tcp", direction, port, "-j", "DROP"});
    if (rc != 0)
      throw std::runtime_error("iptables " + std::string(action) + " INPUT -i lo -p tcp " + direction + " " + port +
                               " -j DROP exited " + std::to_string(rc) + " (root and iptables are needed)");
  }
}

}  // namespace testenv
