#pragma once
// AmqpPublisher: one AMQP connection with one confirm-mode channel (rabbitmq-c).

#include "outbox/rabbitmq_c.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "broker/broker_event.h"
#include "broker/broker_link.h"
#include "config/config.h"
#include "outbox/amqp/amqp_error.h"
#include "outbox/amqp/connection.h"

namespace relay {

// The connection settings of amqp.* (the relay's client properties included).
outbox::amqp::Settings amqp_settings(const AmqpConfig& config);

// Publishes persistent, mandatory messages on a channel in confirm mode and decodes
// what the broker sends back. Delivery tags are counted here from 1 per channel
// (rabbitmq-c does not report them) and restart when the channel is reopened.
//
// Thread safety: none. One thread owns the publisher (rabbitmq-c connections must
// not be shared). Owns a socket: not copyable.
class AmqpPublisher : public BrokerLink {
 public:
  explicit AmqpPublisher(AmqpConfig config);
  ~AmqpPublisher() override;
  AmqpPublisher(const AmqpPublisher&) = delete;
  AmqpPublisher& operator=(const AmqpPublisher&) = delete;

  // Opens the connection, logs in, opens a channel and selects confirm mode.
  // Throws AmqpError (message without password).
  void connect() override;
  bool connected() const override { return conn_.is_open(); }
  // Drops the connection without waiting for the broker.
  void disconnect() override;

  // Publishes one message and returns its delivery tag.
  // REQUIRES: connected(). Throws UnpublishableMessage (nothing sent) when the
  // message breaks an AMQP limit (a shortstr over 255 bytes, a reserved header
  // name, a content header larger than the negotiated frame_max),
  // UnencodableMessage when rabbitmq-c refuses it anyway, AmqpError when the
  // socket fails.
  std::uint64_t publish(const OutboundMessage& message) override;

  // Waits up to `timeout` for one event (zero: only what is already readable).
  // Heartbeats are serviced while waiting. A closed channel is reopened in confirm
  // mode before kChannelClosed is returned; so is a connection the broker closed with
  // a code other than 320 (connection-forced), reconnected at once (the event says
  // connection_level). After kConnectionClosed the publisher is disconnected.
  std::optional<BrokerEvent> next_event(std::chrono::milliseconds timeout) override;

  // The connection's socket, for poll() while idle; -1 when not connected.
  int socket() const override;
  // While corked the kernel sends full TCP segments instead of one per message, so
  // the broker reads many messages per receive; uncorking sends what is queued.
  // Uncork before waiting for the broker. No-op when not connected.
  void set_corked(bool corked) override;
  // Frames rabbitmq-c has already read: poll() on socket() would not see them.
  bool has_buffered_data() const override;
  // Whether next_event(0) may find something: buffered frames, or bytes (or an
  // error) on the socket; always true over TLS (see AmqpConnection::tls). One
  // poll() instead of the receive, poll and clock reads of an empty next_event(0).
  bool readable_now() const override;

  // True between connection.blocked and connection.unblocked (a broker resource alarm).
  bool blocked() const override { return blocked_; }
  // "host:port/vhost", for logs.
  const std::string& endpoint() const override { return conn_.endpoint(); }

 private:
  void open_channel();
  std::optional<BrokerEvent> decode_method(const amqp_frame_t& frame);
  BrokerEvent read_return(const amqp_frame_t& frame);
  void check_rpc(amqp_rpc_reply_t reply, const char* what);

  void check_alternate_exchange();

  outbox::amqp::AmqpConnection conn_;
  // amqp.send_row_id, send_sequence, send_type, send_timestamp, alternate_exchange.
  bool send_row_id_, send_sequence_, send_type_, send_timestamp_;
  std::string alternate_exchange_;
  amqp_channel_t channel_ = 0;
  std::uint64_t next_tag_ = 1;
  bool blocked_ = false;
};

}  // namespace relay
