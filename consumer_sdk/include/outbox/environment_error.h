#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// EnvironmentError: a failure that belongs to the environment, not to the message.

#include <stdexcept>

namespace outbox {

// Thrown (by PayloadDecryptor, or by a handler) when something the message needs is
// unreachable for now: a key database, a service the handler calls. The message is
// not at fault, so ConsumerRunner requeues it WITHOUT counting a try and pauses the
// worker as for a lost PostgreSQL session (500 ms, doubling to 10 s per failure in a
// row): an outage never dead-letters messages, however long it lasts. The price is
// the same as for a database outage: a failure thrown as this that is really the
// message's own is requeued for ever, so throw it only for what will come back by
// itself. Anything else a handler throws counts as a try (max_attempts).
class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace outbox
