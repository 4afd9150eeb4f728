#pragma once
// diagnose_socket: why a TCP connection to a broker fails, as a SocketCause and in words.

#include <chrono>
#include <string>

#include "outbox/amqp/amqp_error.h"

namespace outbox::amqp::detail {

struct SocketDiagnosis {
  SocketCause cause = SocketCause::kNone;
  // "cannot resolve 'mq.internal': Name or service not known", "connection refused",
  // "timed out after 2000 ms", "network is unreachable", "TCP connects: the TLS
  // handshake failed"; "" for kConnects.
  std::string text;
};

// rabbitmq-c reports every failure to open a socket as "a socket error occurred" (or
// "request timed out"): an operator cannot tell a broker that is down (refused)
// from a route that drops packets (timed out) or a name that does not resolve. After
// such a failure this tries one TCP connection of its own to `host`:`port` (its first
// address) and says what happened. When the TCP connection succeeds now, the failure
// was later: with `tls` the TLS handshake (kTls), else the AMQP handshake or a peer
// that came back (kConnects, no text). One connection attempt, bounded by `timeout`;
// nothing is sent on it.
//
// Thread safety: none needed (no shared state).
SocketDiagnosis diagnose_socket(const std::string& host, int port, std::chrono::milliseconds timeout, bool tls);

}  // namespace outbox::amqp::detail
