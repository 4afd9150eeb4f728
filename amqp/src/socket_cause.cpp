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

// Owns one socket descriptor.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string tcp_failure_cause(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return "cannot resolve '" + host + "': " + ::gai_strerror(rc);
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  Fd sock{::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol)};
  if (sock.fd < 0) return error_text(errno);
  if (::connect(sock.fd, found->ai_addr, found->ai_addrlen) == 0) return "";
  if (errno != EINPROGRESS) return error_text(errno);
  pollfd p{sock.fd, POLLOUT, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready == 0) return "timed out after " + std::to_string(timeout.count()) + " ms";
  if (ready < 0) return error_text(errno);
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) return error_text(errno);
  return so_error == 0 ? "" : error_text(so_error);
}

}  // namespace outbox::amqp::detail
