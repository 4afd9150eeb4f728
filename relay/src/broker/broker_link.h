#pragma once
// BrokerLink: what the relay loop asks of its connection to the broker.

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "broker/broker_event.h"
#include "outbox/amqp/amqp_error.h"

namespace relay {

// The publish-side view of a claimed outbox row. Borrowed strings: the row owns them.
struct OutboundMessage {
  std::int64_t outbox_id = 0;
  const std::string* message_id = nullptr;
  const std::string* exchange = nullptr;
  const std::string* routing_key = nullptr;
  const std::string* type = nullptr;
  const std::string* content_type = nullptr;
  const std::string* correlation_id = nullptr;  // may be null
  const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
  const std::string* payload = nullptr;
  // A keyed row's key and sequence (ClaimedRow::key_seq): sent as x-outbox-key and
  // x-outbox-seq. Both or neither.
  const std::string* ordering_key = nullptr;
  std::optional<std::int64_t> key_seq;
  std::int64_t created_unix_s = 0;  // created_at, whole seconds since 1970 (negative before)
};

// A failure of the connection or the channel. The text carries no credentials.
using AmqpError = outbox::amqp::AmqpError;

// A message that AMQP cannot carry (a short string over 255 bytes: exchange,
// routing key, message id, type, content type, correlation id, header name), or a
// created_at before 1970 as the timestamp property (amqp.send_timestamp). It
// was not sent and the connection is untouched; the fault is the row's own.
class UnpublishableMessage : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The client library could not encode a message that passed the checks above (an
// AMQP limit it enforces while writing). Part of it may have been written, so the
// connection was dropped; the fault is still the row's own.
class UnencodableMessage : public outbox::amqp::AmqpError {
 public:
  using outbox::amqp::AmqpError::AmqpError;
};

// One connection with one confirm-mode channel: publish, and read what the broker
// says back (acks, nacks, returns, closes) as BrokerEvents. Delivery tags count from
// 1 per channel and restart when the channel is reopened. AmqpPublisher implements
// it on rabbitmq-c; tests give the loop's collaborators a fake.
//
// Errors: outbox::amqp::AmqpError (the link failed: every unconfirmed message is in
// doubt), UnpublishableMessage (the message's own fault, nothing sent, the link
// intact), UnencodableMessage (the message's own fault, the link dropped).
//
// Thread safety: none; one thread owns a link. Implementations own a socket: not
// copyable.
class BrokerLink {
 public:
  virtual ~BrokerLink() = default;

  // Opens the connection and a confirm-mode channel. Throws AmqpError.
  virtual void connect() = 0;
  virtual bool connected() const = 0;
  // Drops the connection without waiting for the broker.
  virtual void disconnect() = 0;
  // "host:port/vhost", for logs.
  virtual const std::string& endpoint() const = 0;

  // Publishes one message and returns its delivery tag. REQUIRES: connected().
  virtual std::uint64_t publish(const OutboundMessage& message) = 0;
  // Waits up to `timeout` for one event (zero: only what is already readable). A
  // closed channel is reopened before kChannelClosed is returned; after
  // kConnectionClosed the link is disconnected.
  virtual std::optional<BrokerEvent> next_event(std::chrono::milliseconds timeout) = 0;

  // The socket, for poll() while idle; -1 when not connected.
  virtual int socket() const = 0;
  // Corked, many messages go in full segments; uncork before waiting for the broker.
  virtual void set_corked(bool corked) = 0;
  // Frames already read that poll() on socket() would not see.
  virtual bool has_buffered_data() const = 0;
  // Whether next_event(0) may find something.
  virtual bool readable_now() const = 0;
  // True between connection.blocked and connection.unblocked (a resource alarm).
  virtual bool blocked() const = 0;
};

}  // namespace relay
