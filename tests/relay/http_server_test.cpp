// HttpServer under attack, served in this process on loopback: idle floods and
// slowloris clients never delay a probe, and every hostile connection is closed
// within the server's timeouts.
#include "ops/http_server.h"

#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <thread>

#include "http_attack.h"
#include "loopback_http_server.h"

using namespace std::chrono_literals;

namespace {

const auto kIdleTimeout = relay::HttpLimits{}.idle_timeout;
const auto kHeaderTimeout = relay::HttpLimits{}.header_read_timeout;
// What the client side adds to a close it observes (its poll loop, scheduling).
constexpr double kSlackMs = 300;
constexpr double kProbeLimitMs = 100;

// An HttpServer on 127.0.0.1 with fixed routes, run on its own thread.
class ServedOnLoopback : public testenv::LoopbackHttpServer {
 public:
  ServedOnLoopback()
      : LoopbackHttpServer(relay::HttpRoutes{[] { return std::string("# TYPE up gauge\nup 1\n"); },
                                             [] { return std::optional<std::string>(); },
                                             [] { return std::optional<std::string>(); }}) {}
};

void check_probes(const testenv::ProbeStats& probes) {
  MESSAGE("probes: " << probes.probes << ", failed: " << probes.failures << ", p50 " << probes.quantile_ms(0.5)
                     << " ms, p99 " << probes.quantile_ms(0.99) << " ms, max " << probes.max_ms() << " ms");
  INFO("probes: " << probes.probes << ", failed: " << probes.failures << " (" << probes.first_failure
                  << "), p50 " << probes.quantile_ms(0.5) << " ms, max " << probes.max_ms() << " ms");
  CHECK(probes.probes >= 100);
  CHECK(probes.failures == 0);
  CHECK(probes.max_ms() < kProbeLimitMs);
}

}  // namespace

TEST_CASE("500 idle connections, reopened as fast as they are closed, never delay /healthz past 100 ms") {
  REQUIRE(testenv::raise_open_file_limit(2048));
  ServedOnLoopback server;
  testenv::HostileOptions flood;
  flood.connections = 500;
  flood.duration = 3s;
  auto attack = std::async(std::launch::async, [&] { return testenv::hostile_clients(server.address(), flood); });
  std::this_thread::sleep_for(300ms);  // the flood is up (500 connections at 2000/s)
  auto probes = testenv::probe_series(server.address(), "/healthz", 20ms, 2500ms);
  auto stats = attack.get();

  check_probes(probes);
  MESSAGE("idle flood: opened " << stats.opened << ", longest lived " << stats.max_lifetime_ms << " ms");
  INFO("opened " << stats.opened << ", closed by the server " << stats.closed_by_server << ", longest lived "
                 << stats.max_lifetime_ms << " ms, still open " << stats.still_open);
  CHECK(stats.opened >= 500);
  // Every idle connection is closed: shed for a newer one, or at the idle timeout.
  CHECK(stats.still_open == 0);
  CHECK(stats.max_lifetime_ms < kIdleTimeout.count() + kSlackMs);
}

TEST_CASE("300 slowloris connections sending a header byte a second never delay /healthz past 100 ms") {
  REQUIRE(testenv::raise_open_file_limit(2048));
  ServedOnLoopback server;
  testenv::HostileOptions slowloris;
  slowloris.connections = 300;
  slowloris.duration = 3s;
  slowloris.byte_interval = 1s;
  auto attack = std::async(std::launch::async, [&] { return testenv::hostile_clients(server.address(), slowloris); });
  std::this_thread::sleep_for(300ms);
  auto probes = testenv::probe_series(server.address(), "/healthz", 20ms, 2500ms);
  auto stats = attack.get();

  check_probes(probes);
  MESSAGE("slowloris: opened " << stats.opened << ", longest lived " << stats.max_lifetime_ms << " ms");
  INFO("opened " << stats.opened << ", longest lived " << stats.max_lifetime_ms << " ms, still open "
                 << stats.still_open);
  CHECK(stats.still_open == 0);
  CHECK(stats.max_lifetime_ms < kHeaderTimeout.count() + kSlackMs);
}

TEST_CASE("a slowloris sending a header byte every 100 ms is cut off at the header-read timeout of the whole header") {
  ServedOnLoopback server;
  testenv::HostileOptions slowloris;
  slowloris.connections = 10;  // under the connection cap: none is shed, each meets the timeout
  slowloris.duration = 2s;
  slowloris.byte_interval = 100ms;  // a per-byte timeout would never fire
  auto stats = testenv::hostile_clients(server.address(), slowloris);

  INFO("opened " << stats.opened << ", closed " << stats.closed_by_server << ", longest lived "
                 << stats.max_lifetime_ms << " ms, still open " << stats.still_open);
  CHECK(stats.closed_by_server >= 10);
  CHECK(stats.still_open == 0);
  CHECK(stats.max_lifetime_ms < kHeaderTimeout.count() + kSlackMs);
}

TEST_CASE("a keep-alive connection is served request after request, and closed once idle for the idle timeout") {
  namespace beast = boost::beast;
  namespace http = beast::http;
  ServedOnLoopback server;
  const auto address = server.address();
  const auto colon = address.rfind(':');
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  beast::flat_buffer buffer;
  for (const char* target : {"/healthz", "/readyz", "/metrics"}) {
    if (target != std::string("/healthz")) std::this_thread::sleep_for(kIdleTimeout / 2);  // open still
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.keep_alive(true);
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    CHECK(res.result() == http::status::ok);
    CHECK(res.keep_alive());
  }
  const auto idle_from = std::chrono::steady_clock::now();
  char byte;
  beast::error_code ec;
  stream.expires_after(5s);
  stream.read_some(boost::asio::buffer(&byte, 1), ec);  // waits for the server to close
  const auto waited = std::chrono::steady_clock::now() - idle_from;
  CHECK(ec == boost::asio::error::eof);
  CHECK(waited >= kIdleTimeout - 50ms);
  CHECK(waited < kIdleTimeout + 300ms);
}
