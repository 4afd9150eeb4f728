#pragma once
// HttpServer: the relay's operational endpoints (/metrics, /healthz, /readyz) over
// HTTP/1.1, parsed and written by Boost.Beast.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

class HttpServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Serves GET /metrics (Prometheus text format 0.0.4), /healthz and /readyz (200
// "ok"/"ready", or 503 with the reason), 404 for other paths and 405 for other
// methods. Keep-alive; a request must arrive within 10 s and stay under 8 KiB of
// header and 4 KiB of body; at most 32 connections at once (more are closed).
//
// Thread safety: construct, start() and stop() on one thread; the server then runs
// on whatever thread runs `io`. stop() and the destructor must not race io.run()
// unless io is stopped. Owns a socket: not copyable.
class HttpServer {
 public:
  // Binds and listens on `listen` ("host:port", see parse_listen_address; port 0
  // picks a free port). Throws HttpServerError naming the address on failure.
  HttpServer(boost::asio::io_context& io, const std::string& listen, HttpRoutes routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Starts accepting (handlers run on io's thread).
  void start();
  // Stops accepting; connections in progress finish or time out.
  void stop();
  // "host:port" actually bound (the real port when 0 was asked for).
  std::string local_address() const;

 private:
  class Listener;
  std::shared_ptr<Listener> listener_;
};

// Parses "host:port" (IPv4 literal, "[IPv6]", or "localhost") into an endpoint.
// Throws std::invalid_argument with a one-line reason (used by config checks).
boost::asio::ip::tcp::endpoint parse_listen_address(const std::string& listen);

}  // namespace relay
