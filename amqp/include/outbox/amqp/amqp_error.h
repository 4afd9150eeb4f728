#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// AmqpError: the one exception type of the AMQP connection layer and its users.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace outbox::amqp {

// What our own TCP connection found after rabbitmq-c could not open a socket
// (detail::diagnose_socket, amqp/src/socket_cause.h). rabbitmq-c says only "a socket
// error occurred"; this is what tells a broker that is down from a route that drops
// packets or a name that does not resolve.
enum class SocketCause {
  kNone,         // not diagnosed: the failure was not about opening a socket
  kDns,          // the host name does not resolve
  kRefused,      // nothing listens on the port (ECONNREFUSED)
  kTimeout,      // no answer within the connect timeout (or ETIMEDOUT)
  kUnreachable,  // no route: network or host unreachable
  kTls,          // TCP connects, so the TLS handshake is what failed
  kConnects,     // TCP connects now (plain amqp://): the failure was later, or passed
  kOther,        // another socket error (its strerror text is in what())
};

// Which close the broker sent: a channel.close (one channel ends) or a
// connection.close (the whole connection ends).
enum class CloseScope { kNone, kChannel, kConnection };

// The broker's close as the AMQP 0-9-1 frame gives it; all zero when it sent none.
struct BrokerClose {
  CloseScope scope = CloseScope::kNone;
  std::uint16_t reply_code = 0;  // 403 ACCESS_REFUSED, 404 NOT_FOUND, 530 NOT_ALLOWED, ...
  std::uint16_t class_id = 0;    // the method the broker refused (10/11: connection.start-ok)
  std::uint16_t method_id = 0;
};

// A failure of the connection, a channel or a setting of it. what() never holds a
// credential (no URI, no password): only setting names, host:port/vhost, library
// status text and the broker's reply text on one line. The fields say the same in
// the library's and the broker's own terms, so that a caller decides on them
// (ConnectFailure in the relay) and never on the words of what().
// Thread safety: an immutable value.
class AmqpError : public std::runtime_error {
 public:
  struct Fields {
    int status = 0;  // rabbitmq-c's amqp_status_enum (negative); 0 when it gave none
    BrokerClose close;
    SocketCause socket_cause = SocketCause::kNone;

    // A failure the library reported by status alone.
    static Fields of_status(int status) {
      Fields f;
      f.status = status;
      return f;
    }
  };

  // Two constructors, not a default argument: GCC cannot use Fields' member
  // initializers inside the class that nests it.
  explicit AmqpError(const std::string& what) : std::runtime_error(what) {}
  AmqpError(const std::string& what, Fields fields) : std::runtime_error(what), fields_(fields) {}

  // rabbitmq-c's status (AMQP_STATUS_*), 0 when the failure was not the library's.
  int status() const { return fields_.status; }
  const BrokerClose& close() const { return fields_.close; }
  SocketCause socket_cause() const { return fields_.socket_cause; }
  const Fields& fields() const { return fields_; }

 private:
  Fields fields_;
};

}  // namespace outbox::amqp
