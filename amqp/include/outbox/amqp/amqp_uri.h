#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// AmqpUri: an amqp:// or amqps:// URI taken apart by rabbitmq-c's own parser.

#include <string>

namespace outbox::amqp {

// The parts of a URI, percent-decoded, as amqp_parse_url reads them: defaults
// guest:guest@localhost:5672/ (5671 for amqps://). endpoint() is the only form
// that may be logged: "host:port/vhost", never the user or password.
// Thread safety: an immutable value.
class AmqpUri {
 public:
  // Throws AmqpError naming `key` (e.g. "amqp.uri") and the expected form, never
  // any part of `uri`: a bad URI is often a password with an unencoded @, : or /.
  static AmqpUri parse(const std::string& uri, const std::string& key);

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  const std::string& vhost() const { return vhost_; }
  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  bool tls() const { return tls_; }
  // "host:port/vhost", for logs and errors.
  std::string endpoint() const;

 private:
  AmqpUri() = default;
  std::string host_, vhost_, user_, password_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace outbox::amqp
