#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// AmqpError: the one exception type of the AMQP connection layer and its users.

#include <stdexcept>

namespace outbox::amqp {

// A failure of the connection, a channel or a setting of it. what() never holds a
// credential (no URI, no password): only setting names, host:port/vhost, library
// status text and the broker's reply text on one line.
// Thread safety: an immutable value.
class AmqpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace outbox::amqp
