#include "ops/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#ifdef __linux__
#include <linux/sockios.h>  // SIOCOUTQNSD
#endif

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <unordered_map>

#include "config/endpoint_syntax.h"
#include "ops/http_connection_cap.h"
#include "outbox/one_line.h"

namespace relay {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using Strand = net::strand<net::io_context::executor_type>;
using Phase = HttpConnectionCap::Phase;

// After a failed accept (out of file descriptors, say): try again this much later
// rather than spin on the error.
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);

// Bytes of request (and of requests pipelined after it) read ahead per connection: room
// for one request at the parser's limits (8 KiB header, 4 KiB body). A client sending
// more waits in TCP until the requests before are answered.
constexpr std::size_t kMaxBuffered = 16 * 1024;

// How often a written response is checked for delivery (see Session::await_delivery):
// the first check soon, for a client a round trip away, then backing off so a client that
// does not read costs a few checks a second until the write timeout.
constexpr auto kDeliveryPollFirst = std::chrono::milliseconds(1);
constexpr auto kDeliveryPollMax = std::chrono::milliseconds(32);

class Session;

// What the listener and its sessions share; used on the server's strand only.
struct Shared {
  Shared(HttpRoutes r, const HttpLimits& l) : routes(std::move(r)), limits(l), cap(l.max_connections) {}
  HttpRoutes routes;
  HttpLimits limits;
  HttpConnectionCap cap;
  std::unordered_map<HttpConnectionCap::Id, std::weak_ptr<Session>> sessions;  // the open ones, by id in cap
};

http::response<http::string_body> respond(const Shared& shared, const http::request<http::string_body>& req) {
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
    res.body() = why ? outbox::one_line(*why) + "\n" : (target == "/healthz" ? "ok\n" : "ready\n");
  }
  res.prepare_payload();
  return res;
}

// Bytes written to the socket that the kernel has not sent yet: the peer's receive window
// has no room for them (or, for a round trip, its congestion window). 0 where unknown.
// Not the unacknowledged bytes: a client's delayed ACK would hold each response ~40 ms.
std::size_t unsent_bytes(tcp::socket& socket) {
#ifdef SIOCOUTQNSD
  int n = 0;
  if (::ioctl(socket.native_handle(), SIOCOUTQNSD, &n) == 0 && n > 0) return static_cast<std::size_t>(n);
#else
  (void)socket;
#endif
  return 0;
}

// One client connection: wait for a request's first byte (idle timeout), read it whole
// (header-read timeout), answer and wait until the client has taken the answer (write
// timeout), repeat while keep-alive. Each phase is reported to the cap, which may have the
// listener shed the connection for a newer one. Runs on the server's strand.
//
// One response at a time: a request pipelined behind another is not parsed, let alone
// rendered, until the previous response has left for the client (its TCP had room for
// it). The kernel would otherwise take response after response into its send buffer for a
// client that never reads, each a /metrics render: a few bytes of the attacker's CPU for
// much of ours. A client that does not read gets at most its receive window's worth.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared, HttpConnectionCap::Id id)
      : stream_(std::move(socket)), delivery_(stream_.get_executor()), shared_(std::move(shared)), id_(id) {}
  ~Session() { forget(); }

  void start() {
    // A response goes out in one write; Nagle would hold its last segment for an ACK that a
    // delayed-ACK client sends only after its timer (and so delay await_delivery).
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    wait_for_request();
  }

  // Closes the connection at once to make room for a newer one; the pending
  // operation then ends with operation_aborted.
  void shed() {
    forget();
    close();
  }

 private:
  // Fresh (as the cap counts it) on the first call, keep-alive idle on later ones.
  void wait_for_request() {
    if (buffer_.size() > 0) {  // the next request arrived with the last one (pipelining)
      read_request();
      return;
    }
    stream_.expires_after(shared_->limits.idle_timeout);
    stream_.async_read_some(buffer_.prepare(1024),
                            beast::bind_front_handler(&Session::on_first_bytes, shared_from_this()));
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    if (closed_) return;
    if (ec) {  // idle timeout, or the client left
      close();
      return;
    }
    buffer_.commit(n);
    read_request();
  }

  void read_request() {
    shared_->cap.enter(id_, Phase::reading);
    parser_.emplace();
    parser_->header_limit(8 * 1024);
    parser_->body_limit(4 * 1024);
    // One deadline for the whole request: a tcp_stream's expiry holds across the
    // many reads of async_read, so trickled bytes do not extend it.
    stream_.expires_after(shared_->limits.header_read_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (closed_) return;
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
    response_.body() = "bad request: " + outbox::one_line(why, 200) + "\n";
    response_.prepare_payload();
    write();
  }

  void write() {
    shared_->cap.enter(id_, Phase::writing);
    write_deadline_ = std::chrono::steady_clock::now() + shared_->limits.write_timeout;
    stream_.expires_after(shared_->limits.write_timeout);
    http::async_write(stream_, response_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (closed_) return;
    if (ec || !response_.keep_alive()) {  // a last response is delivered by the kernel after the close
      close();
      return;
    }
    delivery_poll_ = kDeliveryPollFirst;
    await_delivery({});
  }

  // Still writing (as the cap counts it) until the kernel has sent the whole response: it
  // is in the client's socket buffer, if not yet read. A client that does not take it
  // within the write timeout (from the start of the write) is cut off; until then it is
  // stuck here, next in line to be shed after the idle. There is no readiness event for
  // an empty send queue, hence the polling.
  void await_delivery(beast::error_code ec) {
    if (closed_ || ec) return;  // closed, or the timer was cancelled by close()
    if (unsent_bytes(stream_.socket()) == 0) {
      shared_->cap.enter(id_, Phase::idle);
      wait_for_request();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= write_deadline_) {
      close();
      return;
    }
    delivery_.expires_at(std::min(now + delivery_poll_, write_deadline_));
    delivery_poll_ = std::min(delivery_poll_ * 2, kDeliveryPollMax);
    delivery_.async_wait(beast::bind_front_handler(&Session::await_delivery, shared_from_this()));
  }

  void close() {
    closed_ = true;
    delivery_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  // Leaves the cap's count at once, so a shed connection is never chosen twice.
  void forget() {
    shared_->cap.remove(id_);
    shared_->sessions.erase(id_);
  }

  beast::tcp_stream stream_;
  net::steady_timer delivery_;  // await_delivery's polls
  std::chrono::steady_clock::time_point write_deadline_;
  std::chrono::milliseconds delivery_poll_ = kDeliveryPollFirst;
  beast::flat_buffer buffer_{kMaxBuffered};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
  const HttpConnectionCap::Id id_;
  bool closed_ = false;
};

}  // namespace

// Accepts connections onto the server's strand, making room under the cap first.
class HttpServer::Listener : public std::enable_shared_from_this<HttpServer::Listener> {
 public:
  Listener(net::io_context& io, const tcp::endpoint& endpoint, HttpRoutes routes, const HttpLimits& limits)
      : strand_(net::make_strand(io)),
        acceptor_(strand_),
        retry_(strand_),
        shared_(std::make_shared<Shared>(std::move(routes), limits)) {
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw HttpServerError("cannot listen on " + endpoint_text(endpoint) + ": " + ec.message());
  }

  void accept() {
    acceptor_.async_accept(strand_, beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }

  // From any thread: the acceptor is closed on the strand.
  void stop() {
    net::post(strand_, [self = shared_from_this()] { self->close(); });
  }

  // REQUIRES: no thread runs the io_context.
  void close() {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  }

  std::string local_address() const { return endpoint_text(acceptor_.local_endpoint()); }

  static std::string endpoint_text(const tcp::endpoint& e) {
    auto host = e.address().to_string();
    if (e.address().is_v6()) host = "[" + host + "]";
    return host + ":" + std::to_string(e.port());
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // stopped
    if (ec) {
      spdlog::debug("http: accept failed: {}", ec.message());
      retry_.expires_after(kAcceptRetry);
      retry_.async_wait([self = shared_from_this()](beast::error_code e) {
        if (!e && self->acceptor_.is_open()) self->accept();
      });
      return;
    }
    make_room();
    const auto id = shared_->cap.add();
    auto session = std::make_shared<Session>(std::move(socket), shared_, id);
    shared_->sessions.emplace(id, session);
    session->start();
    accept();
  }

  // At the cap, sheds the connection the cap picks, so the new one is always served.
  void make_room() {
    const auto victim = shared_->cap.victim();
    if (!victim) return;
    auto it = shared_->sessions.find(*victim);
    auto session = it == shared_->sessions.end() ? nullptr : it->second.lock();
    if (session) {
      session->shed();
    } else {  // ending already; its destructor has not run yet
      shared_->cap.remove(*victim);
      if (it != shared_->sessions.end()) shared_->sessions.erase(it);
    }
  }

  Strand strand_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  std::shared_ptr<Shared> shared_;
};

HttpServer::HttpServer(net::io_context& io, const std::string& listen, HttpRoutes routes, HttpLimits limits) {
  tcp::endpoint endpoint;
  try {
    const auto address = parse_listen_address(listen);
    endpoint = tcp::endpoint(net::ip::make_address(address.host), address.port);
  } catch (const std::invalid_argument& e) {
    throw HttpServerError(e.what());
  }
  if (limits.max_connections == 0) throw HttpServerError("HttpLimits::max_connections must be at least 1");
  listener_ = std::make_shared<Listener>(io, endpoint, std::move(routes), limits);
}

HttpServer::~HttpServer() {
  if (listener_) listener_->close();
}

void HttpServer::start() { listener_->accept(); }

void HttpServer::stop() {
  if (listener_) listener_->stop();
}

std::string HttpServer::local_address() const { return listener_->local_address(); }

}  // namespace relay
