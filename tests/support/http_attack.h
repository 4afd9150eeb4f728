#pragma once
// Test support: hostile HTTP clients (an idle flood, a slowloris) and a timed prober
// on raw loopback sockets, for the tests of the relay's HTTP endpoint under attack.
// Each call blocks its thread for the duration; run the attack and the prober on
// separate threads (std::async) to attack and probe at once.

#include <chrono>
#include <string>
#include <vector>

namespace testenv {

struct ProbeStats {
  int probes = 0;
  int failures = 0;                  // no 200 within the probe's 1 s limit
  std::string first_failure;         // why the first failed probe failed
  std::vector<double> latencies_ms;  // connect to the whole response, per answered probe
  double max_ms() const;
  double quantile_ms(double q) const;
};

// GETs `target` from "host:port" every `period` for `duration`, each probe on a new
// connection (as a kubelet probes), and times each from connect to the whole response.
ProbeStats probe_series(const std::string& address, const std::string& target, std::chrono::milliseconds period,
                        std::chrono::milliseconds duration);

struct HostileOptions {
  int connections = 500;                     // kept open at once
  std::chrono::milliseconds duration{3000};  // reopen what the server closes for this long
  std::chrono::milliseconds grace{2000};     // then wait this long for the server to close the rest
  // 0: send nothing (an idle flood). Otherwise send one byte of a request header that
  // never ends every this often (a slowloris), the first at once.
  std::chrono::milliseconds byte_interval{0};
  // New connections per second at most: many times what the server's timeouts close
  // (its cap / its idle timeout: 128/s), without the attack starving the prober of CPU.
  int opens_per_second = 2000;
};

struct HostileStats {
  int opened = 0;
  int connect_failures = 0;
  int closed_by_server = 0;
  double max_lifetime_ms = 0;  // longest a connection lived (from its connect) before the server closed it
  int still_open = 0;          // not closed by the server at the end of the grace period
};

// Runs the attack of `options` against "host:port" (an IPv4 address) and reports it.
// The calling thread runs at nice 10: the attacker stands for clients on other hosts,
// so its own CPU should not be taken from the server and the prober on this one.
HostileStats hostile_clients(const std::string& address, const HostileOptions& options);

// Raises the soft open-file limit to at least `n` (up to the hard limit); false if
// the hard limit is lower.
bool raise_open_file_limit(unsigned long n);

// How many of `wanted` connections fit in this process's open files when each costs
// `fds_per_connection` of them (2 when the server runs in the same process), after
// raising the soft limit as far as the hard limit allows and keeping 128 spare. A
// container may cap the hard limit at 1024 (podman with runc on this kind of host).
int connections_within_fd_limit(int wanted, int fds_per_connection);

}  // namespace testenv
