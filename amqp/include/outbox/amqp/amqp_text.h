#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Conversions between rabbitmq-c's C types and C++ strings and durations.

#include "outbox/rabbitmq_c.h"
#include <sys/time.h>

#include <chrono>
#include <string>

#include "outbox/amqp/amqp_error.h"

namespace outbox::amqp {

// A view of `s` for rabbitmq-c. REQUIRES: `s` outlives the returned bytes.
amqp_bytes_t bytes_of(const std::string& s);

// A copy of `b` (empty for len 0, even when b.bytes is null).
std::string string_of(amqp_bytes_t b);

// For rabbitmq-c's timeouts; negative counts as zero.
timeval to_timeval(std::chrono::milliseconds ms);

// What an RPC reply says went wrong: library status text or the broker's close
// code and text, never a credential. Raw broker text: put it on one line before
// logging (AmqpConnection::check does).
std::string describe(amqp_rpc_reply_t reply);

// What describe() says, as AmqpError's fields: the library's status, or the
// broker's close (channel or connection, reply code, the method it refused).
// REQUIRES: the reply's decoded method is still alive (read it before a drop).
AmqpError::Fields fields_of(amqp_rpc_reply_t reply);

}  // namespace outbox::amqp
