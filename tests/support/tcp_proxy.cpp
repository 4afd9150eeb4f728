#include "tcp_proxy.h"

#include <utility>  // before Boost.Asio: its C++20 coroutine header needs std::exchange

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <functional>
#include <future>
#include <map>
#include <thread>

namespace testenv {

using boost::asio::ip::tcp;

namespace {

// One proxied connection: a client socket, a server socket and a pump per direction.
struct Session : std::enable_shared_from_this<Session> {
  Session(boost::asio::io_context& io, const std::atomic<bool>& stalled, const std::atomic<int>& delay_ms,
          std::atomic<std::uint64_t>& bytes_to_target)
      : client(io), server(io), stalled(stalled), delay_ms(delay_ms), bytes_to_target(bytes_to_target) {}

  tcp::socket client, server;
  const std::atomic<bool>& stalled;
  const std::atomic<int>& delay_ms;
  std::atomic<std::uint64_t>& bytes_to_target;  // client -> server, written
  std::array<char, 65536> up{}, down{};
  bool closed = false;
  std::function<void()> on_close;

  void start() {
    pump(client, server, up);
    pump(server, client, down);
  }

  void pump(tcp::socket& from, tcp::socket& to, std::array<char, 65536>& buf) {
    auto self = shared_from_this();
    if (closed) return;
    if (stalled) {
      auto timer = std::make_shared<boost::asio::steady_timer>(from.get_executor(), std::chrono::milliseconds(10));
      timer->async_wait([self, timer, &from, &to, &buf](auto) { self->pump(from, to, buf); });
      return;
    }
    from.async_read_some(boost::asio::buffer(buf), [self, &from, &to, &buf](auto ec, std::size_t n) {
      if (ec) return self->close(false);
      if (const int delay = self->delay_ms; delay > 0) {
        auto timer = std::make_shared<boost::asio::steady_timer>(from.get_executor(), std::chrono::milliseconds(delay));
        timer->async_wait([self, timer, &from, &to, &buf, n](auto) { self->forward(from, to, buf, n); });
        return;
      }
      self->forward(from, to, buf, n);
    });
  }

  // Writes what a read brought, unless a stall began meanwhile: then the bytes wait
  // too (a read posted before the stall must not slip one chunk through).
  void forward(tcp::socket& from, tcp::socket& to, std::array<char, 65536>& buf, std::size_t n) {
    auto self = shared_from_this();
    if (closed) return;
    if (stalled) {
      auto timer = std::make_shared<boost::asio::steady_timer>(from.get_executor(), std::chrono::milliseconds(10));
      timer->async_wait([self, timer, &from, &to, &buf, n](auto) { self->forward(from, to, buf, n); });
      return;
    }
    boost::asio::async_write(to, boost::asio::buffer(buf.data(), n),
                             [self, &from, &to, &buf](auto ec2, std::size_t written) {
                               if (ec2) return self->close(false);
                               if (&to == &self->server) self->bytes_to_target += written;
                               self->pump(from, to, buf);
                             });
  }

  // `reset`: abortive close (RST) instead of FIN.
  void close(bool reset) {
    if (closed) return;
    closed = true;
    boost::system::error_code ignored;
    for (auto* s : {&client, &server}) {
      if (reset) s->set_option(boost::asio::socket_base::linger(true, 0), ignored);
      else s->shutdown(tcp::socket::shutdown_both, ignored);
      s->close(ignored);
    }
    if (on_close) on_close();
  }
};

}  // namespace

struct TcpProxy::Impl {
  boost::asio::io_context io;
  // Keeps io.run() going while nothing listens and no connection is open (refusing).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  tcp::endpoint target;
  tcp::endpoint local;  // where it listens (kept: the acceptor is closed while refusing)
  std::atomic<bool> stalled{false};
  bool refusing = false;  // io thread only
  std::atomic<int> delay_ms{0};
  std::atomic<int> open{0};
  std::atomic<std::uint64_t> bytes_to_target{0};
  std::map<std::uint64_t, std::shared_ptr<Session>> sessions;  // io thread only
  std::uint64_t next_id = 0;
  std::thread thread;

  // Binds `local` (the port it had before, after a refusal) and accepts. A closed
  // listening socket is what a client must see while refusing: connection refused
  // at connect(), which libpq answers by trying the next host (an accepted and
  // reset connection fails the whole connection attempt instead).
  void listen() {
    acceptor.open(local.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(local);
    acceptor.listen();
    local = acceptor.local_endpoint();
    accept();
  }

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted) return;
      if (!ec) connect(std::move(socket));
      if (acceptor.is_open()) accept();
    });
  }

  void connect(tcp::socket client) {
    auto session = std::make_shared<Session>(io, stalled, delay_ms, bytes_to_target);
    session->client = std::move(client);
    auto id = next_id++;
    sessions[id] = session;
    ++open;
    session->on_close = [this, id] {
      --open;
      // Erase later: the session may be inside one of its own handlers.
      boost::asio::post(io, [this, id] { sessions.erase(id); });
    };
    session->server.async_connect(target, [session](boost::system::error_code ec) {
      if (ec) return session->close(true);
      boost::system::error_code ignored;
      session->server.set_option(tcp::no_delay(true), ignored);
      session->client.set_option(tcp::no_delay(true), ignored);
      session->start();
    });
  }

  template <class Fn>
  auto on_io_thread(Fn fn) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto result = task.get_future();
    boost::asio::post(io, [&task] { task(); });
    return result.get();
  }
};

TcpProxy::TcpProxy(std::string target_host, std::uint16_t target_port, std::uint16_t listen_port)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = tcp::endpoint(boost::asio::ip::make_address(target_host), target_port);
  impl_->local = tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), listen_port);
  impl_->listen();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

TcpProxy::~TcpProxy() {
  impl_->on_io_thread([this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    auto sessions = impl_->sessions;
    for (auto& [id, s] : sessions) s->close(true);
    return 0;
  });
  impl_->io.stop();
  impl_->thread.join();
}

std::uint16_t TcpProxy::port() const { return impl_->local.port(); }

int TcpProxy::cut_all() {
  return impl_->on_io_thread([this] {
    int n = 0;
    auto sessions = impl_->sessions;
    for (auto& [id, s] : sessions)
      if (!s->closed) {
        s->close(true);
        ++n;
      }
    return n;
  });
}

void TcpProxy::set_stalled(bool stalled) { impl_->stalled = stalled; }
void TcpProxy::set_refusing(bool refusing) {
  impl_->on_io_thread([this, refusing] {
    if (refusing == impl_->refusing) return 0;
    impl_->refusing = refusing;
    boost::system::error_code ignored;
    if (refusing) {
      impl_->acceptor.close(ignored);
    } else {
      impl_->listen();
    }
    return 0;
  });
}
void TcpProxy::set_delay_ms(int delay_ms) { impl_->delay_ms = delay_ms; }
int TcpProxy::open_connections() const { return impl_->open; }
std::uint64_t TcpProxy::bytes_to_target() const { return impl_->bytes_to_target; }

}  // namespace testenv
