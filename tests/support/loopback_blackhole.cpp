#include "loopback_blackhole.h"

#include <stdexcept>

#include "relay_process.h"

namespace testenv {

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
    const std::vector<std::string> argv = {"/usr/sbin/iptables", "-w", "5", action, "INPUT", "-i",  "lo",   "-p",
                                           "tcp",                direction, port, "-j",   "DROP"};
    const auto r = run_command(argv);
    if (r.exit_code != 0)
      throw std::runtime_error("iptables " + std::string(action) + " INPUT ... " + direction + " " + port +
                               " failed (root and iptables are needed): " + r.output);
  }
}

}  // namespace testenv
