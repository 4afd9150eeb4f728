#pragma once
// tcp_failure_cause: why a TCP connection to a broker fails, in words.

#include <chrono>
#include <string>

namespace outbox::amqp::detail {

// rabbitmq-c reports every failure to open a socket as "a socket error occurred" (or
// "request timed out"): an operator cannot tell a broker that is down (refused)
// from a route that drops packets (timed out) or a name that does not resolve. After
// such a failure this tries one TCP connection of its own to `host`:`port` (its first
// address) and says what happened: "cannot resolve 'mq.internal': Name or service not
// known", "connection refused", "timed out after 2000 ms", "network is unreachable";
// "" when the TCP connection succeeds now (the failure was later: TLS, the AMQP
// handshake, or a peer that came back). One connection attempt, bounded by
// `timeout`; nothing is sent on it.
//
// Thread safety: none needed (no shared state).
std::string tcp_failure_cause(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace outbox::amqp::detail
