#include "http_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "one_line.h"

namespace relay {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::size_t kMaxConnections = 32;
constexpr auto kRequestTimeout = std::chrono::seconds(10);

struct Shared {
  HttpRoutes routes;
  std::atomic<std::size_t> connections{0};
};

http::response<http::string_body> respond(const Shared& shared,
                                          const http::request<http::string_body>& req) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::server, "outbox-relay");
  res.set(http::field::cache_control, "no-store");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  const auto target = std::string(req.target().substr(0, req.target().find('?')));
  const bool known = target == "/metrics" || target == "/healthz" || target == "/readyz";
  if (!known) {
    res.result(http::status::not_found);
    res.body() = "not found; try /metrics, /healthz or /readyz\n";
  } else if (req.method() != http::verb::get) {
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET");
    res.body() = "only GET is allowed\n";
  } else if (target == "/metrics") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.body() = shared.routes.metrics();
  } else {
    auto why = target == "/healthz" ? shared.routes.not_alive() : shared.routes.not_ready();
    res.result(why ? http::status::service_unavailable : http::status::ok);
    res.body() = why ? one_line(*why) + "\n" : (target == "/healthz" ? "ok\n" : "ready\n");
  }
  res.prepare_payload();
  return res;
}

// One client connection: read a request, answer, repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {
    ++shared_->connections;
  }
  ~Session() { --shared_->connections; }

  void read() {
    parser_.emplace();
    parser_->header_limit(8 * 1024);
    parser_->body_limit(4 * 1024);
    stream_.expires_after(kRequestTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

 private:
  void on_read(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof) {
      close();
      return;
    }
    if (ec) {
      // A parse error (bad syntax, header or body too large) gets a 400; a socket
      // error just ends the connection.
      if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
        send_bad_request(ec.message());
      } else {
        close();
      }
      return;
    }
    response_ = respond(*shared_, parser_->get());
    write();
  }

  void send_bad_request(const std::string& why) {
    response_ = {};
    response_.result(http::status::bad_request);
    response_.version(11);
    response_.keep_alive(false);
    response_.set(http::field::content_type, "text/plain; charset=utf-8");
    response_.body() = "bad request: " + one_line(why, 200) + "\n";
    response_.prepare_payload();
    write();
  }

  void write() {
    stream_.expires_after(kRequestTimeout);
    http::async_write(stream_, response_,
                      beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (ec || !response_.keep_alive()) {
      close();
      return;
    }
    read();
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace

class HttpServer::Listener : public std::enable_shared_from_this<HttpServer::Listener> {
 public:
  Listener(net::io_context& io, const tcp::endpoint& endpoint, HttpRoutes routes)
      : io_(io), acceptor_(io), shared_(std::make_shared<Shared>()) {
    shared_->routes = std::move(routes);
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw HttpServerError("cannot listen on " + endpoint_text(endpoint) + ": " + ec.message());
  }

  void accept() {
    acceptor_.async_accept(net::make_strand(io_),
                           beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }

  void stop() {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  std::string local_address() const { return endpoint_text(acceptor_.local_endpoint()); }

  static std::string endpoint_text(const tcp::endpoint& e) {
    auto host = e.address().to_string();
    if (e.address().is_v6()) host = "[" + host + "]";
    return host + ":" + std::to_string(e.port());
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;  // stopped
    if (ec) {
      spdlog::debug("http: accept failed: {}", ec.message());
    } else if (shared_->connections >= kMaxConnections) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), shared_)->read();
    }
    if (acceptor_.is_open()) accept();
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
  std::shared_ptr<Shared> shared_;
};

HttpServer::HttpServer(net::io_context& io, const std::string& listen, HttpRoutes routes) {
  tcp::endpoint endpoint;
  try {
    endpoint = parse_listen_address(listen);
  } catch (const std::invalid_argument& e) {
    throw HttpServerError(e.what());
  }
  listener_ = std::make_shared<Listener>(io, endpoint, std::move(routes));
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() { listener_->accept(); }

void HttpServer::stop() {
  if (listener_) listener_->stop();
}

std::string HttpServer::local_address() const { return listener_->local_address(); }

tcp::endpoint parse_listen_address(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
    throw std::invalid_argument("expected host:port, e.g. 127.0.0.1:9187, got '" +
                                one_line(listen, 80) + "'");
  std::string host = listen.substr(0, colon);
  const std::string port_text = listen.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535)
    throw std::invalid_argument("port must be a number from 0 to 65535, got '" +
                                one_line(port_text, 20) + "'");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec)
    throw std::invalid_argument("host must be an IP address (or localhost), got '" +
                                one_line(host, 80) + "'");
  return tcp::endpoint(address, static_cast<unsigned short>(std::stoi(port_text)));
}

}  // namespace relay
