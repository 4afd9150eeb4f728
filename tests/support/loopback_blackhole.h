#pragma once
// LoopbackBlackhole: a real half-open link for tests, on loopback only.

#include <string>

namespace testenv {

// While it exists (or until heal()), every TCP packet to or from 127.0.0.1:`port` on
// the loopback interface is dropped (two iptables rules in INPUT, -i lo): connections
// through that port stay open but nothing arrives and nothing is acknowledged, as
// with a blackholed route, a frozen host or a NAT that lost the connection. A
// userspace proxy cannot do this (its kernel keeps acknowledging), so the kernel's
// own timeouts (TCP_USER_TIMEOUT, keepalives) are really exercised. Use it on a
// TcpProxy's port, never on a shared server's. Needs root and iptables; throws
// naming the command otherwise.
//
// Thread safety: none. Owns firewall rules: not copyable.
class LoopbackBlackhole {
 public:
  explicit LoopbackBlackhole(int port);
  ~LoopbackBlackhole();
  LoopbackBlackhole(const LoopbackBlackhole&) = delete;
  LoopbackBlackhole& operator=(const LoopbackBlackhole&) = delete;

  // Removes the rules: packets flow again. Idempotent.
  void heal();

 private:
  void rules(const char* action);  // "-I" or "-D"
  int port_;
  bool active_ = false;
};

}  // namespace testenv
