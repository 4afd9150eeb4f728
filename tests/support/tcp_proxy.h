#pragma once
// TcpProxy: a loopback TCP forwarder that tests put between a relay and a server,
// so they can cut, stall or refuse its connections without touching the server.

#include <cstdint>
#include <memory>
#include <string>

namespace testenv {

// Listens on 127.0.0.1 (an ephemeral port unless one is given) and forwards every
// accepted connection to target_host:target_port, bytes unchanged, on a thread of
// its own.
//
// Thread safety: every public method may be called from any thread.
// Owns sockets and a thread: not copyable.
class TcpProxy {
 public:
  TcpProxy(std::string target_host, std::uint16_t target_port, std::uint16_t listen_port = 0);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const;

  // Resets every open connection (RST on both sides), mid-stream: the client sees
  // "connection reset", the server a vanished peer. Returns how many were cut.
  int cut_all();
  // While stalled no byte moves in either direction; connections stay open, as
  // with a peer that hangs or a network that drops everything.
  void set_stalled(bool stalled);
  // Each chunk read waits `delay_ms` before it is forwarded, in both directions: a
  // slow link (a round trip costs 2 x delay_ms; throughput at most 64 KiB per
  // delay_ms and direction). 0, the default, forwards at once.
  void set_delay_ms(int delay_ms);
  // While refusing nothing listens on port() (a client's connect() is refused); open
  // connections are not touched. When it ends the proxy listens on the same port again.
  void set_refusing(bool refusing);
  // Connections open now.
  int open_connections() const;
  // Bytes forwarded from clients to the target so far, over every connection.
  std::uint64_t bytes_to_target() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace testenv
