#pragma once
// Test support: the relay's HttpServer on 127.0.0.1 (a free port), serving given
// routes on its own thread. Header-only: tests that use it link outbox_relay_core.

#include <boost/asio/io_context.hpp>
#include <string>
#include <thread>
#include <utility>

#include "ops/http_server.h"

namespace testenv {

// Starts serving on construction; the destructor stops the server and joins.
// Not copyable (owns a thread and a socket).
class LoopbackHttpServer {
 public:
  explicit LoopbackHttpServer(relay::HttpRoutes routes) : server_(io_, "127.0.0.1:0", std::move(routes)) {
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~LoopbackHttpServer() {
    server_.stop();
    io_.stop();
    thread_.join();
  }
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  // "127.0.0.1:PORT", as bound.
  std::string address() const { return server_.local_address(); }

 private:
  boost::asio::io_context io_;
  relay::HttpServer server_;
  std::thread thread_;
};

}  // namespace testenv
