#include "socket_cause.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

namespace outbox::amqp::detail {
namespace {

// strerror's text with a lower-case first letter, to read inside a sentence.
std::string error_text(int err) {
  std::string text = std::strerror(err);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// A failed connect()'s errno as a cause, with its text.
SocketDiagnosis from_errno(int err) {
  switch (err) {
    case ECONNREFUSED: return {SocketCause::kRefused, error_text(err)};
    case ETIMEDOUT: return {SocketCause::kTimeout, error_text(err)};
    case ENETUNREACH:
    case EHOSTUNREACH: return {SocketCause::kUnreachable, error_text(err)};
    default: return {SocketCause::kOther, error_text(err)};
  }
}

// Owns one socket descriptor.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

SocketDiagnosis diagnose_socket(const std::string& host, int port, std::chrono::milliseconds timeout, bool tls) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return {SocketCause::kDns, "cannot resolve '" + host + "': " + ::gai_strerror(rc)};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  Fd sock{::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol)};
  if (sock.fd < 0) return {SocketCause::kOther, error_text(errno)};
  const SocketDiagnosis connects = tls ? SocketDiagnosis{SocketCause::kTls, "TCP connects: the TLS handshake failed"}
                                       : SocketDiagnosis{SocketCause::kConnects, ""};
  if (::connect(sock.fd, found->ai_addr, found->ai_addrlen) == 0) return connects;
  if (errno != EINPROGRESS) return from_errno(errno);
  pollfd p{sock.fd, POLLOUT, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready == 0) return {SocketCause::kTimeout, "timed out after " + std::to_string(timeout.count()) + " ms"};
  if (ready < 0) return {SocketCause::kOther, error_text(errno)};
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0)
    return {SocketCause::kOther, error_text(errno)};
  return so_error == 0 ? connects : from_errno(so_error);
}

}  // namespace outbox::amqp::detail
