#include "amqp_publisher.h"

#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>

#include "one_line.h"
#include "outbox/amqp_wire.h"
#include "outbox/header_rules.h"

namespace relay {
namespace {

amqp_bytes_t bytes_of(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

std::string string_of(amqp_bytes_t b) {
  return std::string(static_cast<const char*>(b.bytes), b.len);
}

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// A plain TCP socket, or for amqps:// a TLS socket that verifies the broker's
// certificate (against amqp.ca_file, else the system's CA store) and, unless
// amqp.verify_hostname is false, that it names the host. TLS 1.2 at least.
// Returns null with `error` set when the TLS settings cannot be loaded.
amqp_socket_t* new_socket(amqp_connection_state_t conn, const AmqpConfig& c, bool tls, std::string& error) {
  if (!tls) return amqp_tcp_socket_new(conn);
  amqp_socket_t* socket = amqp_ssl_socket_new(conn);
  if (!socket) return nullptr;
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, c.verify_hostname ? 1 : 0);
  if (amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST) != AMQP_STATUS_OK)
    error = "amqp: cannot require TLS 1.2 or later";
  else if (!c.ca_file.empty() && amqp_ssl_socket_set_cacert(socket, c.ca_file.c_str()) != AMQP_STATUS_OK)
    error = "amqp.ca_file: cannot load CA certificates from '" + c.ca_file + "'";
  else if (c.ca_file.empty() &&
           SSL_CTX_set_default_verify_paths(static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket))) != 1)
    error = "amqp: cannot load the system's CA certificates";
  else if (!c.cert_file.empty() &&
           amqp_ssl_socket_set_key(socket, c.cert_file.c_str(), c.key_file.c_str()) != AMQP_STATUS_OK)
    error = "amqp.cert_file/key_file: cannot load the client certificate '" + c.cert_file + "' and its key";
  return error.empty() ? socket : nullptr;
}

// Describes an RPC failure without any credential (only codes and broker text).
std::string describe(amqp_rpc_reply_t reply) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "missing RPC reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
        return "connection closed by broker: " + std::to_string(m->reply_code) + " " +
               string_of(m->reply_text);
      }
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        return "channel closed by broker: " + std::to_string(m->reply_code) + " " +
               string_of(m->reply_text);
      }
      return "broker error (method " + std::to_string(reply.reply.id) + ")";
  }
  return "unknown RPC reply";
}

}  // namespace

AmqpPublisher::AmqpPublisher(AmqpConfig config) : config_(std::move(config)) {}

AmqpPublisher::~AmqpPublisher() {
  if (!conn_) return;
  // Best effort, bounded: a graceful close lets the broker flush its confirms.
  timeval tv = to_timeval(std::chrono::milliseconds(1000));
  amqp_set_rpc_timeout(conn_, &tv);
  amqp_channel_close(conn_, channel_, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  disconnect();
}

void AmqpPublisher::check_rpc(amqp_rpc_reply_t reply, const char* what) {
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) return;
  auto text = describe(reply);
  disconnect();
  throw AmqpError(std::string(what) + " at " + endpoint_ + " failed: " + one_line(text));
}

void AmqpPublisher::connect() {
  disconnect();
  std::string uri = config_.uri;  // amqp_parse_url writes into its buffer
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(uri.data(), &info) != AMQP_STATUS_OK)
    throw AmqpError("amqp.uri: not a valid amqp://user:password@host:port/vhost URI");
  endpoint_ = std::string(info.host) + ":" + std::to_string(info.port) + "/" + info.vhost;

  conn_ = amqp_new_connection();
  std::string tls_error;
  amqp_socket_t* socket = new_socket(conn_, config_, info.ssl != 0, tls_error);
  if (!socket) {
    disconnect();
    throw AmqpError(tls_error.empty() ? "cannot create a socket for " + endpoint_ : tls_error);
  }
  timeval tv = to_timeval(std::chrono::milliseconds(config_.connect_timeout_ms));
  int rc = amqp_socket_open_noblock(socket, info.host, info.port, &tv);
  if (rc != AMQP_STATUS_OK) {
    disconnect();
    throw AmqpError("cannot connect to " + endpoint_ + (info.ssl ? " (TLS)" : "") + ": " +
                    amqp_error_string2(rc));
  }
  amqp_set_handshake_timeout(conn_, &tv);
  amqp_set_rpc_timeout(conn_, &tv);

  // Announce connection.blocked so the broker tells us about resource alarms.
  amqp_table_entry_t caps[2];
  caps[0].key = amqp_cstring_bytes("connection.blocked");
  caps[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
  caps[0].value.value.boolean = 1;
  caps[1].key = amqp_cstring_bytes("publisher_confirms");
  caps[1].value.kind = AMQP_FIELD_KIND_BOOLEAN;
  caps[1].value.value.boolean = 1;
  amqp_table_entry_t props[2];
  props[0].key = amqp_cstring_bytes("capabilities");
  props[0].value.kind = AMQP_FIELD_KIND_TABLE;
  props[0].value.value.table = amqp_table_t{2, caps};
  props[1].key = amqp_cstring_bytes("connection_name");
  props[1].value.kind = AMQP_FIELD_KIND_UTF8;
  props[1].value.value.bytes = amqp_cstring_bytes("outbox-relay");
  amqp_table_t client_properties{2, props};

  check_rpc(amqp_login_with_properties(conn_, info.vhost, 0, config_.frame_max, config_.heartbeat_s,
                                       &client_properties, AMQP_SASL_METHOD_PLAIN, info.user,
                                       info.password),
            "login");
  channel_ = 0;
  open_channel();
}

void AmqpPublisher::open_channel() {
  // A fresh channel number: frames still in flight for the old one cannot be mistaken.
  channel_ = static_cast<amqp_channel_t>(channel_ % 2000 + 1);
  amqp_channel_open(conn_, channel_);
  check_rpc(amqp_get_rpc_reply(conn_), "channel.open");
  amqp_confirm_select(conn_, channel_);
  check_rpc(amqp_get_rpc_reply(conn_), "confirm.select");
  next_tag_ = 1;
}

void AmqpPublisher::set_corked(bool corked) {
  if (!conn_) return;
  int on = corked ? 1 : 0;
  ::setsockopt(amqp_get_sockfd(conn_), IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

int AmqpPublisher::socket() const { return conn_ ? amqp_get_sockfd(conn_) : -1; }

bool AmqpPublisher::has_buffered_data() const {
  return conn_ && (amqp_frames_enqueued(conn_) || amqp_data_in_buffer(conn_));
}

void AmqpPublisher::disconnect() {
  if (conn_) amqp_destroy_connection(conn_);
  conn_ = nullptr;
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
      throw UnpublishableMessage("header name '" + one_line(h.first, 64) + "' is reserved: " +
                                 std::string(reserved->why));
  }
}

// rabbitmq-c writes the whole content header (properties and header table) into
// one frame of at most the negotiated frame_max; a larger one cannot be sent.
static void check_frame_size(const OutboundMessage& m, std::size_t frame_max) {
  const outbox::WireProperties wire{m.content_type, m.message_id, m.type, m.correlation_id, m.headers};
  const std::size_t bytes = outbox::content_header_frame_bytes(wire);
  if (bytes > frame_max)
    throw UnpublishableMessage("its AMQP content header frame would be " + std::to_string(bytes) +
                               " bytes (" + std::to_string(m.headers->size()) +
                               " headers), above the negotiated frame_max of " + std::to_string(frame_max));
}

// Status codes rabbitmq-c returns when it cannot encode what it was given (rather
// than when the socket fails).
static bool encoding_error(int rc) {
  return rc == AMQP_STATUS_TABLE_TOO_BIG || rc == AMQP_STATUS_BAD_AMQP_DATA || rc == AMQP_STATUS_INVALID_PARAMETER;
}

std::uint64_t AmqpPublisher::publish(const OutboundMessage& m) {
  check_short_strings(m);
  check_frame_size(m, static_cast<std::size_t>(amqp_get_frame_max(conn_)));
  std::vector<amqp_table_entry_t> entries;
  entries.reserve(m.headers->size() + 1);
  amqp_table_entry_t id_entry;
  id_entry.key = amqp_cstring_bytes("x-outbox-id");
  id_entry.value.kind = AMQP_FIELD_KIND_I64;
  id_entry.value.value.i64 = m.outbox_id;
  entries.push_back(id_entry);
  for (const auto& [name, value] : *m.headers) {
    amqp_table_entry_t e;
    e.key = bytes_of(name);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = bytes_of(value);
    entries.push_back(e);
  }

  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                 AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
                 AMQP_BASIC_HEADERS_FLAG;
  props.content_type = bytes_of(*m.content_type);
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  props.message_id = bytes_of(*m.message_id);
  props.type = bytes_of(*m.type);
  props.timestamp = static_cast<uint64_t>(m.created_unix_s);
  props.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  if (m.correlation_id) {
    props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
    props.correlation_id = bytes_of(*m.correlation_id);
  }

  int rc = amqp_basic_publish(conn_, channel_, bytes_of(*m.exchange), bytes_of(*m.routing_key),
                              /*mandatory=*/1, /*immediate=*/0, &props, bytes_of(*m.payload));
  if (rc != AMQP_STATUS_OK) {
    disconnect();
    if (encoding_error(rc))
      throw UnencodableMessage(std::string("the AMQP client cannot encode it: ") + amqp_error_string2(rc));
    throw AmqpError("publish to " + endpoint_ + " failed: " + amqp_error_string2(rc));
  }
  return next_tag_++;
}

std::optional<BrokerEvent> AmqpPublisher::next_event(std::chrono::milliseconds timeout) {
  // Frames that are no event for the caller (connection.blocked/unblocked, stray
  // content frames) do not end the wait: returning early would look like a
  // confirm timeout to a caller waiting for acks.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!conn_) return BrokerEvent{BrokerEvent::Kind::kConnectionClosed, 0, false, "", "not connected"};
    if (!amqp_frames_enqueued(conn_) && !amqp_data_in_buffer(conn_)) amqp_maybe_release_buffers(conn_);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    amqp_frame_t frame;
    timeval tv = to_timeval(std::max(left, std::chrono::milliseconds(0)));
    int rc = amqp_simple_wait_frame_noblock(conn_, &frame, &tv);
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
    case AMQP_BASIC_RETURN_METHOD:
      return read_return(frame);
    case AMQP_CHANNEL_CLOSE_METHOD: {
      auto* c = static_cast<amqp_channel_close_t*>(method.decoded);
      std::string reason = "channel closed by broker: " + std::to_string(c->reply_code) + " " +
                           one_line(string_of(c->reply_text));
      amqp_channel_close_ok_t ok{};
      amqp_send_method(conn_, frame.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
      try {
        open_channel();
      } catch (const AmqpError& e) {
        return BrokerEvent{Kind::kConnectionClosed, 0, false, "", reason + "; reopen failed: " + e.what()};
      }
      BrokerEvent ev{Kind::kChannelClosed, 0, false, "", reason};
      ev.reply_code = c->reply_code;
      return ev;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
      auto* c = static_cast<amqp_connection_close_t*>(method.decoded);
      std::string reason = "connection closed by broker: " + std::to_string(c->reply_code) + " " +
                           one_line(string_of(c->reply_text));
      amqp_connection_close_ok_t ok{};
      amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
      disconnect();
      BrokerEvent ev{Kind::kConnectionClosed, 0, false, "", reason};
      ev.reply_code = c->reply_code;
      return ev;
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
      // Logged here, once per change of state; the loop stops claiming meanwhile.
      auto* b = static_cast<amqp_connection_blocked_t*>(method.decoded);
      if (!blocked_)
        spdlog::warn("AMQP {} blocked publishing ({}): claiming paused until it unblocks", endpoint_,
                     one_line(string_of(b->reason), 200));
      blocked_ = true;
      return std::nullopt;
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
      if (blocked_) spdlog::info("AMQP {} unblocked: claiming resumed", endpoint_);
      blocked_ = false;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

BrokerEvent AmqpPublisher::read_return(const amqp_frame_t& frame) {
  auto* r = static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
  BrokerEvent ev{BrokerEvent::Kind::kReturn, 0, false, "", ""};
  ev.reason = "returned by broker: " + std::to_string(r->reply_code) + " " +
              one_line(string_of(r->reply_text)) + " (exchange '" +
              one_line(string_of(r->exchange)) + "', routing key '" +
              one_line(string_of(r->routing_key)) + "')";
  amqp_message_t message;
  amqp_rpc_reply_t reply = amqp_read_message(conn_, frame.channel, &message, 0);
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
    disconnect();
    return BrokerEvent{BrokerEvent::Kind::kConnectionClosed, 0, false, "",
                       "reading a returned message failed: " + describe(reply)};
  }
  if (message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
    ev.message_id = string_of(message.properties.message_id);
  amqp_destroy_message(&message);
  return ev;
}

}  // namespace relay
