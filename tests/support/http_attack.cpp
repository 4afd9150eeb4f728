#include "http_attack.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace testenv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

sockaddr_in ipv4_endpoint(const std::string& address) {
  auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (colon == std::string::npos || inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1)
    throw std::runtime_error("not an IPv4 host:port: " + address);
  return sa;
}

// A connected socket with 1 s send and receive limits, or -1 (errno set).
int connect_to(const sockaddr_in& sa) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval limit{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// One probe: "" when the server answered 200, else why not.
std::string probe_once(const sockaddr_in& sa, const std::string& target) {
  int fd = connect_to(sa);
  if (fd < 0) return std::string("connect: ") + std::strerror(errno);
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n";
  std::string reply;
  std::string error;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    error = std::string("send: ") + std::strerror(errno);
  } else {
    char buf[4096];
    for (;;) {  // Connection: close, so the reply ends at the server's FIN
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        reply.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0) error = std::string("recv: ") + std::strerror(errno);
      break;
    }
  }
  ::close(fd);
  if (reply.rfind("HTTP/1.1 200 ", 0) == 0) return "";
  if (!error.empty()) return error + " after " + std::to_string(reply.size()) + " bytes";
  return "no 200: '" + reply.substr(0, reply.find('\r')) + "'";
}

struct Hostile {
  int fd;
  Clock::time_point opened;
  Clock::time_point next_byte;
  std::size_t sent = 0;
};

// The header a slowloris sends one byte at a time; it never ends.
char slow_byte(std::size_t i) {
  static const std::string start = "GET /healthz HTTP/1.1\r\nX-Slow: ";
  return i < start.size() ? start[i] : 'a';
}

}  // namespace

double ProbeStats::max_ms() const {
  return latencies_ms.empty() ? 0 : *std::max_element(latencies_ms.begin(), latencies_ms.end());
}

double ProbeStats::quantile_ms(double q) const {
  if (latencies_ms.empty()) return 0;
  auto sorted = latencies_ms;
  std::sort(sorted.begin(), sorted.end());
  return sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

ProbeStats probe_series(const std::string& address, const std::string& target, std::chrono::milliseconds period,
                        std::chrono::milliseconds duration) {
  const auto sa = ipv4_endpoint(address);
  ProbeStats stats;
  const auto end = Clock::now() + duration;
  for (auto next = Clock::now(); next < end; next += period) {
    std::this_thread::sleep_until(next);
    const auto start = Clock::now();
    auto error = probe_once(sa, target);
    ++stats.probes;
    if (error.empty()) {
      stats.latencies_ms.push_back(ms_between(start, Clock::now()));
    } else if (stats.failures++ == 0) {
      stats.first_failure = error;
    }
  }
  return stats;
}

HostileStats hostile_clients(const std::string& address, const HostileOptions& options) {
  const auto sa = ipv4_endpoint(address);
  const bool slow = options.byte_interval.count() > 0;
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);  // this thread only (Linux)
  const auto open_spacing = std::chrono::microseconds(1000000 / std::max(1, options.opens_per_second));
  auto next_open = Clock::now();
  HostileStats stats;
  std::vector<Hostile> open;
  const auto attack_end = Clock::now() + options.duration;
  const auto grace_end = attack_end + options.grace;
  std::vector<pollfd> fds;
  for (;;) {
    auto now = Clock::now();
    if (now >= grace_end || (now >= attack_end && open.empty())) break;
    while (now < attack_end && static_cast<int>(open.size()) < options.connections && Clock::now() >= next_open) {
      next_open = std::max(next_open + open_spacing, Clock::now() - 10 * open_spacing);  // small bursts only
      int fd = connect_to(sa);
      if (fd < 0) {
        ++stats.connect_failures;
        break;
      }
      ++stats.opened;
      open.push_back({fd, Clock::now(), Clock::now()});
    }
    // Closed by the server: EOF, a reset, or a send that fails. Whatever it answers
    // (a 408, a 400) is read and dropped; only the close counts.
    auto closed = [&](Hostile& h) {
      stats.max_lifetime_ms = std::max(stats.max_lifetime_ms, ms_between(h.opened, Clock::now()));
      ++stats.closed_by_server;
      ::close(h.fd);
      h.fd = -1;
    };
    if (slow) {
      for (auto& h : open) {
        if (Clock::now() < h.next_byte) continue;
        char b = slow_byte(h.sent++);
        if (::send(h.fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1 && errno != EAGAIN) closed(h);
        h.next_byte += options.byte_interval;
      }
      open.erase(std::remove_if(open.begin(), open.end(), [](const Hostile& h) { return h.fd < 0; }), open.end());
    }
    fds.clear();
    for (const auto& h : open) fds.push_back({h.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 5) > 0) {
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[1024];
        ssize_t n = ::recv(open[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN)) closed(open[i]);
      }
      open.erase(std::remove_if(open.begin(), open.end(), [](const Hostile& h) { return h.fd < 0; }), open.end());
    }
  }
  stats.still_open = static_cast<int>(open.size());
  for (auto& h : open) ::close(h.fd);
  return stats;
}

bool raise_open_file_limit(unsigned long n) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= n) return true;
  if (limit.rlim_max < n) return false;
  limit.rlim_cur = n;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

int connections_within_fd_limit(int wanted, int fds_per_connection) {
  const unsigned long needed = static_cast<unsigned long>(wanted) * static_cast<unsigned long>(fds_per_connection) +
                               128;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < needed) {
    limit.rlim_cur = std::min<rlim_t>(needed, limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0 && ::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  }
  if (limit.rlim_cur <= 128) return 0;
  return static_cast<int>(std::min<rlim_t>(static_cast<rlim_t>(wanted), (limit.rlim_cur - 128) / fds_per_connection));
}

}  // namespace testenv
