#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// AmqpConnection: one rabbitmq-c connection, plain or TLS, logged in.

#include "outbox/rabbitmq_c.h"

#include <string>
#include <utility>

#include "outbox/amqp/endpoint_rotation.h"
#include "outbox/amqp/settings.h"

namespace outbox::amqp {

// Opens (URI, TCP or TLS socket, login with client properties, heartbeat,
// frame_max, RPC timeouts), opens and closes channels, and turns failed RPCs into
// AmqpError. What is sent on the channels (publish, confirm, consume) belongs to
// the users, through get(). Every error names host:port/vhost, never the URI or
// password; a failed RPC drops the connection (rabbitmq-c cannot go on after one).
//
// Thread safety: none. One thread owns a connection (rabbitmq-c connections must
// not be shared). Owns a socket: not copyable.
class AmqpConnection {
 public:
  explicit AmqpConnection(Settings settings);
  ~AmqpConnection();  // drops without waiting; call close() for a graceful end
  AmqpConnection(const AmqpConnection&) = delete;
  AmqpConnection& operator=(const AmqpConnection&) = delete;

  // Drops any current connection, then connects and logs in (no channel open).
  // With settings.uris, one attempt at the next endpoint of the rotation: a caller
  // that retries with backoff moves over the cluster's nodes, one per attempt.
  // Throws AmqpError: a bad URI names the key (settings.key_prefix + "uri"), a TLS
  // file its key, a refused connection "cannot connect to host:port/vhost (TLS): ...".
  void open();
  bool is_open() const { return conn_ != nullptr; }
  // The rabbitmq-c handle. REQUIRES: is_open() (null otherwise).
  amqp_connection_state_t get() const { return conn_; }

  // channel.open. REQUIRES: is_open(). Throws AmqpError (and drops).
  void open_channel(amqp_channel_t channel);
  // Throws AmqpError "<what> at <endpoint> failed: <reply on one line>" and drops the
  // connection unless the reply is normal.
  void check(amqp_rpc_reply_t reply, const std::string& what);
  // check() on amqp_get_rpc_reply(): for the method calls that return an *_ok_t.
  void check_rpc(const std::string& what);
  // Like check(), for calls that return a status code (basic.ack, ...).
  void check_status(int status, const std::string& what);

  // Closes `channel` (0: none) and the connection, waiting at most a second for the
  // broker, then drops. No-op when not open. Never throws.
  void close(amqp_channel_t channel);
  // Destroys the connection without a word to the broker.
  void drop();

  // "host:port/vhost" of the last open(), for logs; empty before.
  const std::string& endpoint() const { return endpoint_; }
  // The socket's file descriptor, for poll(); -1 when not open.
  int socket() const;
  // The last open() was over TLS: bytes already taken off the socket may wait in
  // the TLS layer, where poll() on socket() does not see them.
  bool tls() const { return tls_; }

 private:
  // The URI of the next attempt and the key naming it in errors.
  std::pair<const std::string*, std::string> next_uri();

  Settings settings_;
  EndpointRotation rotation_;
  std::size_t current_ = 0;  // index into settings_.uris of the last attempt
  std::string endpoint_;
  bool tls_ = false;
  amqp_connection_state_t conn_ = nullptr;
};

}  // namespace outbox::amqp
