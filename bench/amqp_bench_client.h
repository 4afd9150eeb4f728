#pragma once
// AmqpBenchClient: a plain rabbitmq-c connection for the bench's own broker work
// (declare, purge, delete, the ceiling publisher, the latency consumer).

#include "outbox/rabbitmq_c.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "outbox/amqp/connection.h"

namespace bench {

class BenchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A received message: its id and when it arrived (wall clock, for cross-process
// latency).
struct Delivery {
  std::string message_id;
  std::chrono::system_clock::time_point received;
};

// What a published message carries beyond a persistent body with a content type,
// and where it goes. relay() is what the relay sends by default.
struct WireShape {
  bool mandatory = true;          // basic.publish mandatory flag
  bool message_id = true;         // the message-id property
  bool type_timestamp = true;     // the type and timestamp properties
  bool row_id_header = true;      // a one-entry header table (x-outbox-id)
  bool default_exchange = false;  // "" with the queue's name, instead of the run's direct exchange
  static WireShape relay() { return {}; }
  static WireShape bare() { return {false, false, false, false, true}; }
};

// One connection (amqp:// or amqps://, outbox::amqp) with channel 1 open. Broker
// and connection errors throw outbox::amqp::AmqpError, the bench's own BenchError;
// neither holds credentials.
// Thread safety: none; one thread uses a client at a time. Owns a socket: not copyable.
class AmqpBenchClient {
 public:
  explicit AmqpBenchClient(const std::string& uri);
  ~AmqpBenchClient();
  AmqpBenchClient(const AmqpBenchClient&) = delete;
  AmqpBenchClient& operator=(const AmqpBenchClient&) = delete;

  // A durable direct exchange and a durable classic queue bound with `routing_key`.
  void declare(const std::string& exchange, const std::string& queue, const std::string& routing_key,
               bool quorum = false);
  void remove(const std::string& exchange, const std::string& queue);
  void remove_queue(const std::string& queue);
  void purge(const std::string& queue);
  // Messages ready in the queue (passive declare).
  std::uint32_t depth(const std::string& queue);

  // Puts the channel in confirm mode; publish() then returns delivery tags from 1.
  void confirm_select();
  // A persistent message with `shape`'s flag and properties (the caller picks the
  // exchange and routing key that go with shape.default_exchange).
  std::uint64_t publish(const std::string& exchange, const std::string& routing_key, const std::string& message_id,
                        std::int64_t outbox_id, const std::string& body, const WireShape& shape = WireShape::relay());
  // The next ack/nack within `timeout`: {tag, multiple, nacked}; nullopt on timeout.
  struct Confirm {
    std::uint64_t tag;
    bool multiple;
    bool nacked;
  };
  std::optional<Confirm> next_confirm(std::chrono::milliseconds timeout);

  // Starts an auto-ack consumer on `queue`; next_delivery() returns its messages.
  void consume(const std::string& queue);
  std::optional<Delivery> next_delivery(std::chrono::milliseconds timeout);

 private:
  outbox::amqp::AmqpConnection conn_;
  std::uint64_t next_tag_ = 1;
};

}  // namespace bench
