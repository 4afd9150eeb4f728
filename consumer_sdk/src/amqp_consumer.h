#pragma once
// AmqpConsumer: one rabbitmq-c connection with one consuming channel.

#include "outbox/rabbitmq_c.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/amqp/amqp_error.h"
#include "outbox/amqp/connection.h"
#include "outbox/amqp/settings.h"
#include "outbox/delivery.h"
#include "outbox/runner_options.h"

namespace outbox::detail {

// A failure of the connection, the channel or the consumer. No credentials in it.
using AmqpError = outbox::amqp::AmqpError;

// The connection settings of `o` (amqp_uri, TLS files, heartbeat, timeout), named
// `connection_name` in the broker's management UI. Errors name the amqp_* options.
outbox::amqp::Settings amqp_settings(const RunnerOptions& o, const std::string& connection_name);

struct Binding {
  std::string exchange;
  std::string routing_key;
  std::string exchange_type;
};

// Queue, its bindings and its dead-letter route, declared durable and idempotently.
struct Topology {
  std::string queue;
  std::vector<Binding> bindings;
  std::string dead_letter_exchange;            // fanout; the queue's x-dead-letter-exchange
  std::string dead_letter_queue;               // bound to it; empty: none declared
  QueueType queue_type = QueueType::kClassic;  // both queues
  int delivery_limit = 0;                      // quorum: x-delivery-limit; 0 none
};

// A message as it came off the channel. The message id is raw text, checked later.
struct InboundMessage {
  std::uint64_t delivery_tag = 0;
  std::string message_id;
  Delivery delivery;  // delivery.message_id not yet set
};

// Thread safety: none; one thread owns it (rabbitmq-c connections are single-thread).
// Owns a socket: not copyable.
class AmqpConsumer {
 public:
  explicit AmqpConsumer(outbox::amqp::Settings settings);
  ~AmqpConsumer();
  AmqpConsumer(const AmqpConsumer&) = delete;
  AmqpConsumer& operator=(const AmqpConsumer&) = delete;

  // Opens the connection (amqp:// or amqps://) and channel 1. Throws AmqpError.
  void connect();
  bool connected() const { return conn_.is_open(); }
  // Declares `t` (idempotent). A queue that exists with other arguments is an
  // AmqpError naming it. REQUIRES: connected().
  void declare(const Topology& t);
  // basic.qos(prefetch) and basic.consume (manual acks). REQUIRES: connected().
  void consume(const std::string& queue, int prefetch);
  // The next delivery, or nullopt after `timeout` without one (heartbeats are
  // serviced meanwhile). Throws AmqpError when the channel, the connection or the
  // consumer (queue deleted) is closed; the consumer is then disconnected.
  std::optional<InboundMessage> next(std::chrono::milliseconds timeout);

  void ack(std::uint64_t tag);
  void requeue(std::uint64_t tag);      // basic.nack requeue=true: tried again
  void dead_letter(std::uint64_t tag);  // basic.reject requeue=false: to the dead-letter exchange

  // Closes the channel and connection (bounded wait); unacked messages go back to the queue.
  void close();
  // "host:port/vhost", for logs.
  const std::string& endpoint() const { return conn_.endpoint(); }

 private:
  void rpc(const std::string& what);
  void handle_unexpected_frame();

  outbox::amqp::AmqpConnection conn_;
};

}  // namespace outbox::detail
