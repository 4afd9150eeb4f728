#pragma once
// HttpServer: the relay's operational endpoints (/metrics, /healthz, /readyz) over
// HTTP/1.1, parsed and written by Boost.Beast.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace relay {

// The endpoints' content, supplied by the relay. Called on the io_context's thread,
// so each must be thread-safe with respect to the relay's own threads.
struct HttpRoutes {
  std::function<std::string()> metrics;  // body of GET /metrics
  // nullopt when alive / ready; otherwise why not (one line, served with 503).
  std::function<std::optional<std::string>()> not_alive;
  std::function<std::optional<std::string>()> not_ready;
};

// How long a client may take, and how many may be connected at once. Short on
// purpose: the clients are a kubelet and Prometheus on the pod network, which send a
// whole request at once; anything slower is broken or hostile. docs/OPERATIONS.md
// ("HTTP endpoint limits") explains the numbers.
struct HttpLimits {
  // From the accept, or the end of the previous response (keep-alive), to the first
  // byte of a request; then the connection is closed.
  std::chrono::milliseconds idle_timeout{500};
  // From a request's first byte to its last (header and body), as a whole: a client
  // trickling bytes is cut off at this deadline however often it sends one.
  std::chrono::milliseconds header_read_timeout{500};
  // Writing one response, until the kernel has sent all of it (into the client's receive
  // window): a client that does not read its answers is cut off, and until then the next
  // request it pipelined is not read.
  std::chrono::milliseconds write_timeout{1000};
  // Connections open at once; a new one beyond sheds an old one (HttpConnectionCap).
  std::size_t max_connections = 64;
};

class HttpServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Serves GET /metrics (Prometheus text format 0.0.4), /healthz and /readyz (200
// "ok"/"ready", or 503 with the reason), 404 for other paths and 405 for other
// methods. Keep-alive and pipelining, one response at a time; requests are capped at
// 8 KiB of header and 4 KiB of body (16 KiB read ahead) and bounded in time by
// `HttpLimits`. At the connection cap a new connection is always accepted and an old
// one shed (HttpConnectionCap picks it), so probes are answered while hostile clients
// hold connections.
//
// Thread safety: construct and start() on one thread; every handler then runs on one
// strand of `io` (any number of threads may run io). stop() may be called from any
// thread. The destructor must not race io.run() unless io is stopped. Owns a socket:
// not copyable.
class HttpServer {
 public:
  // Binds and listens on `listen` (see config/endpoint_syntax.h, parse_listen_address; port 0 picks a free
  // port). Throws HttpServerError naming the address on failure.
  HttpServer(boost::asio::io_context& io, const std::string& listen, HttpRoutes routes, HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Starts accepting (handlers run on io's thread).
  void start();
  // Stops accepting (posted to the strand: callable while io runs); connections in
  // progress finish or time out.
  void stop();
  // "host:port" actually bound (the real port when 0 was asked for).
  std::string local_address() const;

 private:
  class Listener;
  std::shared_ptr<Listener> listener_;
};

}  // namespace relay
