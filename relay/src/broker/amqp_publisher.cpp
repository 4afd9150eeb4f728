#include "broker/amqp_publisher.h"

#include "outbox/rabbitmq_c.h"
#include <fmt/chrono.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "outbox/amqp/amqp_text.h"
#include "outbox/amqp_wire.h"
#include "outbox/header_rules.h"
#include "outbox/one_line.h"

namespace relay {

using outbox::amqp::bytes_of;
using outbox::amqp::describe;
using outbox::amqp::string_of;
using outbox::amqp::to_timeval;

outbox::amqp::Settings amqp_settings(const AmqpConfig& c) {
  outbox::amqp::Settings s;
  s.uri = c.uri;
  s.uris = c.uris;
  s.order = c.endpoint_order;
  // Each relay process its own shuffle, so a fleet spreads over the nodes.
  s.order_seed = static_cast<std::uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
                 static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  s.key_prefix = "amqp.";
  s.heartbeat_s = c.heartbeat_s;
  s.connect_timeout_ms = c.connect_timeout_ms;
  // A broker that reads nothing for as long as it may leave a publish unconfirmed is
  // as good as hung: the connection ends instead of a publish blocking for ever. At
  // least 5 s: a lost segment is retransmitted after 200 ms or more, which must not
  // end a connection however short the confirm timeout.
  s.send_timeout_ms = std::max(c.confirm_timeout_ms, 5000);
  s.frame_max = c.frame_max;
  s.ca_file = c.ca_file;
  s.cert_file = c.cert_file;
  s.key_file = c.key_file;
  s.verify_hostname = c.verify_hostname;
  s.connection_name = "outbox-relay";
  // connection.blocked: the broker tells us about resource alarms.
  s.capabilities = {"connection.blocked", "publisher_confirms"};
  return s;
}

AmqpPublisher::AmqpPublisher(AmqpConfig config)
    : conn_(amqp_settings(config)),
      send_row_id_(config.send_row_id),
      send_sequence_(config.send_sequence),
      send_type_(config.send_type),
      send_timestamp_(config.send_timestamp),
      alternate_exchange_(config.alternate_exchange) {}

// Best effort, bounded: a graceful close lets the broker flush its confirms.
AmqpPublisher::~AmqpPublisher() { conn_.close(channel_); }

void AmqpPublisher::check_rpc(amqp_rpc_reply_t reply, const char* what) {
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) blocked_ = false;  // as disconnect()
  conn_.check(reply, what);
}

void AmqpPublisher::connect() {
  disconnect();
  conn_.open();
  channel_ = 0;
  open_channel();
  // Once per connection, not on every channel reopen (poison isolation reopens often).
  if (!alternate_exchange_.empty()) check_alternate_exchange();
}

void AmqpPublisher::open_channel() {
  // A fresh channel number: frames still in flight for the old one cannot be mistaken.
  channel_ = static_cast<amqp_channel_t>(channel_ % 2000 + 1);
  amqp_channel_open(conn_.get(), channel_);
  check_rpc(amqp_get_rpc_reply(conn_.get()), "channel.open");
  amqp_confirm_select(conn_.get(), channel_);
  check_rpc(amqp_get_rpc_reply(conn_.get()), "confirm.select");
  next_tag_ = 1;
}

// Without `mandatory`, the alternate exchange is where unroutable messages go; if it
// is missing they would be dropped with an ack. A passive declare fails (404) on a
// missing exchange: the connection is then refused as a whole, and the relay waits
// (an environment failure) instead of publishing into the void.
void AmqpPublisher::check_alternate_exchange() {
  amqp_exchange_declare(conn_.get(), channel_, bytes_of(alternate_exchange_), amqp_cstring_bytes("direct"),
                        /*passive=*/1, /*durable=*/0, /*auto_delete=*/0, /*internal=*/0, amqp_empty_table);
  try {
    check_rpc(amqp_get_rpc_reply(conn_.get()), "exchange.declare (passive)");
  } catch (const AmqpError& e) {
    disconnect();
    throw AmqpError("amqp.alternate_exchange: the exchange '" + outbox::one_line(alternate_exchange_, 80) +
                        "' cannot be used on " + endpoint() + ": " + outbox::one_line(e.what()),
                    e.fields());  // the broker's 404 or 403 stays what decides
  }
}

void AmqpPublisher::set_corked(bool corked) {
  if (!conn_.is_open()) return;
  int on = corked ? 1 : 0;
  ::setsockopt(conn_.socket(), IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

int AmqpPublisher::socket() const { return conn_.socket(); }

bool AmqpPublisher::has_buffered_data() const {
  return conn_.is_open() && (amqp_frames_enqueued(conn_.get()) || amqp_data_in_buffer(conn_.get()));
}

bool AmqpPublisher::readable_now() const {
  if (!conn_.is_open()) return false;
  if (conn_.tls() || has_buffered_data()) return true;
  pollfd fd{conn_.socket(), POLLIN, 0};
  return ::poll(&fd, 1, 0) != 0;  // -1: let rabbitmq-c find the error and report it
}

void AmqpPublisher::disconnect() {
  conn_.drop();
  blocked_ = false;
}

// Checked before anything is sent: rabbitmq-c refuses such a frame only after the
// method frame may have gone out, and a relay that dropped the connection for it
// would claim the same row again at once, holding up every row behind it.
static void check_short_strings(const OutboundMessage& m) {
  auto check = [](const char* what, const std::string& value) {
    if (value.size() > 255)
      throw UnpublishableMessage(std::string(what) + " is " + std::to_string(value.size()) +
                                 " bytes, AMQP allows at most 255");
  };
  check("exchange", *m.exchange);
  check("routing key", *m.routing_key);
  check("message id", *m.message_id);
  check("type", *m.type);
  check("content type", *m.content_type);
  if (m.correlation_id) check("correlation id", *m.correlation_id);
  for (const auto& h : *m.headers) {
    check("a header name", h.first);
    if (auto reserved = outbox::reserved_header(h.first))
      throw UnpublishableMessage("header name '" + outbox::one_line(h.first, 64) +
                                 "' is reserved: " + std::string(reserved->why));
  }
}

// AMQP's timestamp property is unsigned seconds since 1970: a created_at before
// 1970 (a row written by hand) cannot be sent as one. Names the column and its value.
static void check_timestamp(const OutboundMessage& m) {
  if (m.created_unix_s >= 0) return;
  const std::string text = fmt::format("{:%Y-%m-%d %H:%M:%S}+00",
                                       fmt::gmtime(static_cast<std::time_t>(m.created_unix_s)));
  throw UnpublishableMessage("column created_at: " + text + " (" + std::to_string(m.created_unix_s) +
                             " s since 1970) is before 1970, which the AMQP timestamp (unsigned seconds since "
                             "1970) cannot carry; amqp.send_timestamp false publishes rows without it");
}

// rabbitmq-c writes the whole content header (properties and header table) into
// one frame of at most the negotiated frame_max; a larger one cannot be sent.
static void check_frame_size(const OutboundMessage& m, std::size_t frame_max) {
  const outbox::WireProperties wire{m.content_type,   m.message_id, m.type,
                                    m.correlation_id, m.headers,    m.key_seq ? m.ordering_key : nullptr};
  const std::size_t bytes = outbox::content_header_frame_bytes(wire);
  if (bytes > frame_max)
    throw UnpublishableMessage("its AMQP content header frame would be " + std::to_string(bytes) + " bytes (" +
                               std::to_string(m.headers->size()) + " headers), above the negotiated frame_max of " +
                               std::to_string(frame_max));
}

// Status codes rabbitmq-c returns when it cannot encode what it was given (rather
// than when the socket fails).
static bool encoding_error(int rc) {
  return rc == AMQP_STATUS_TABLE_TOO_BIG || rc == AMQP_STATUS_BAD_AMQP_DATA || rc == AMQP_STATUS_INVALID_PARAMETER;
}

std::uint64_t AmqpPublisher::publish(const OutboundMessage& m) {
  check_short_strings(m);
  if (send_timestamp_) check_timestamp(m);
  check_frame_size(m, static_cast<std::size_t>(amqp_get_frame_max(conn_.get())));
  std::vector<amqp_table_entry_t> entries;
  entries.reserve(m.headers->size() + 3);
  const auto add_i64 = [&entries](const char* name, std::int64_t value) {
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(name);
    e.value.kind = AMQP_FIELD_KIND_I64;
    e.value.value.i64 = value;
    entries.push_back(e);
  };
  if (send_row_id_) add_i64(outbox::kRowIdHeader, m.outbox_id);
  if (send_sequence_ && m.key_seq) {
    amqp_table_entry_t key;
    key.key = amqp_cstring_bytes(outbox::kKeyHeader);
    key.value.kind = AMQP_FIELD_KIND_UTF8;
    key.value.value.bytes = bytes_of(*m.ordering_key);
    entries.push_back(key);
    add_i64(outbox::kKeySeqHeader, *m.key_seq);
  }
  for (const auto& [name, value] : *m.headers) {
    amqp_table_entry_t e;
    e.key = bytes_of(name);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = bytes_of(value);
    entries.push_back(e);
  }

  amqp_basic_properties_t props;
  // The contract: content type, persistent delivery, message id; the rest as
  // configured (amqp.send_*). An empty header table is left out too.
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
  props.content_type = bytes_of(*m.content_type);
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  props.message_id = bytes_of(*m.message_id);
  if (send_type_) {
    props._flags |= AMQP_BASIC_TYPE_FLAG;
    props.type = bytes_of(*m.type);
  }
  if (send_timestamp_) {
    props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    props.timestamp = static_cast<uint64_t>(m.created_unix_s);
  }
  if (!entries.empty()) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  }
  if (m.correlation_id) {
    props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
    props.correlation_id = bytes_of(*m.correlation_id);
  }

  int rc = amqp_basic_publish(conn_.get(), channel_, bytes_of(*m.exchange), bytes_of(*m.routing_key),
                              /*mandatory=*/alternate_exchange_.empty() ? 1 : 0, /*immediate=*/0, &props,
                              bytes_of(*m.payload));
  if (rc != AMQP_STATUS_OK) {
    disconnect();
    if (encoding_error(rc))
      throw UnencodableMessage(std::string("the AMQP client cannot encode it: ") + amqp_error_string2(rc));
    throw AmqpError("publish to " + endpoint() + " failed: " + amqp_error_string2(rc),
                    AmqpError::Fields::of_status(rc));
  }
  return next_tag_++;
}

std::optional<BrokerEvent> AmqpPublisher::next_event(std::chrono::milliseconds timeout) {
  // Frames that are no event for the caller (connection.blocked/unblocked, stray
  // content frames) do not end the wait: returning early would look like a
  // confirm timeout to a caller waiting for acks.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!conn_.is_open()) return BrokerEvent{BrokerEvent::Kind::kConnectionClosed, 0, false, "", "not connected"};
    amqp_connection_state_t conn = conn_.get();
    if (!amqp_frames_enqueued(conn) && !amqp_data_in_buffer(conn)) amqp_maybe_release_buffers(conn);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    amqp_frame_t frame;
    timeval tv = to_timeval(std::max(left, std::chrono::milliseconds(0)));
    int rc = amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT) return std::nullopt;
    if (rc != AMQP_STATUS_OK) {
      disconnect();
      return BrokerEvent{BrokerEvent::Kind::kConnectionClosed, 0, false, "",
                         std::string("connection to broker lost: ") + amqp_error_string2(rc)};
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    if (auto event = decode_method(frame)) return event;
  }
}

std::optional<BrokerEvent> AmqpPublisher::decode_method(const amqp_frame_t& frame) {
  using Kind = BrokerEvent::Kind;
  const auto& method = frame.payload.method;
  switch (method.id) {
    case AMQP_BASIC_ACK_METHOD: {
      auto* a = static_cast<amqp_basic_ack_t*>(method.decoded);
      return BrokerEvent{Kind::kAck, a->delivery_tag, a->multiple != 0, "", ""};
    }
    case AMQP_BASIC_NACK_METHOD: {
      auto* n = static_cast<amqp_basic_nack_t*>(method.decoded);
      return BrokerEvent{Kind::kNack, n->delivery_tag, n->multiple != 0, "", "nacked by broker"};
    }
    case AMQP_BASIC_RETURN_METHOD: return read_return(frame);
    case AMQP_CHANNEL_CLOSE_METHOD: {
      // Everything read from the frame before anything is sent: the decoded method
      // lives in rabbitmq-c's buffers, which the next RPC or a disconnect frees.
      auto* c = static_cast<amqp_channel_close_t*>(method.decoded);
      const int code = c->reply_code;
      std::string reason = "channel closed by broker: " + std::to_string(code) + " " +
                           outbox::one_line(string_of(c->reply_text));
      amqp_channel_close_ok_t ok{};
      amqp_send_method(conn_.get(), frame.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
      try {
        open_channel();
      } catch (const AmqpError& e) {
        return BrokerEvent{Kind::kConnectionClosed, 0, false, "", reason + "; reopen failed: " + e.what()};
      }
      BrokerEvent ev{Kind::kChannelClosed, 0, false, "", reason};
      ev.reply_code = code;
      return ev;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
      auto* c = static_cast<amqp_connection_close_t*>(method.decoded);
      const int code = c->reply_code;  // before disconnect() frees the frame
      std::string reason = "connection closed by broker: " + std::to_string(code) + " " +
                           outbox::one_line(string_of(c->reply_text));
      amqp_connection_close_ok_t ok{};
      amqp_send_method(conn_.get(), 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
      disconnect();
      // 320 connection-forced: the node is going away, so is the link. Any other code
      // the broker chose to send (RabbitMQ 4.0's 541 for one message's 404, among
      // others) is answered as a channel close: a new connection at once, and the
      // caller decides whose fault it was (FailurePolicy::on_channel_close).
      if (code != 320) {
        try {
          connect();
          BrokerEvent ev{Kind::kChannelClosed, 0, false, "", reason + "; reconnected"};
          ev.reply_code = code;
          ev.connection_level = true;
          return ev;
        } catch (const AmqpError& e) {
          reason += "; reconnect failed: " + outbox::one_line(e.what());
        }
      }
      BrokerEvent ev{Kind::kConnectionClosed, 0, false, "", reason};
      ev.reply_code = code;
      return ev;
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
      // Logged here, once per change of state; the loop stops claiming meanwhile.
      auto* b = static_cast<amqp_connection_blocked_t*>(method.decoded);
      if (!blocked_)
        spdlog::warn("AMQP {} blocked publishing ({}): claiming paused until it unblocks", endpoint(),
                     outbox::one_line(string_of(b->reason), 200));
      blocked_ = true;
      return std::nullopt;
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
      if (blocked_) spdlog::info("AMQP {} unblocked: claiming resumed", endpoint());
      blocked_ = false;
      return std::nullopt;
    default: return std::nullopt;
  }
}

BrokerEvent AmqpPublisher::read_return(const amqp_frame_t& frame) {
  auto* r = static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
  BrokerEvent ev{BrokerEvent::Kind::kReturn, 0, false, "", ""};
  ev.reason = "returned by broker: " + std::to_string(r->reply_code) + " " +
              outbox::one_line(string_of(r->reply_text)) + " (exchange '" + outbox::one_line(string_of(r->exchange)) +
              "', routing key '" + outbox::one_line(string_of(r->routing_key)) + "')";
  amqp_message_t message;
  amqp_rpc_reply_t reply = amqp_read_message(conn_.get(), frame.channel, &message, 0);
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
    disconnect();
    return BrokerEvent{BrokerEvent::Kind::kConnectionClosed, 0, false, "",
                       "reading a returned message failed: " + describe(reply)};
  }
  if (message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) ev.message_id = string_of(message.properties.message_id);
  amqp_destroy_message(&message);
  return ev;
}

}  // namespace relay
