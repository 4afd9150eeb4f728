#include "amqp_consumer.h"

#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include "safe_text.h"

namespace outbox::detail {
namespace {

amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

std::string string_of(amqp_bytes_t b) {
  return b.len ? std::string(static_cast<const char*>(b.bytes), b.len) : std::string();
}

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Codes and broker text only: never the URI or its credentials.
std::string describe(amqp_rpc_reply_t reply) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "missing RPC reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
        return "connection closed by broker: " + std::to_string(m->reply_code) + " " + string_of(m->reply_text);
      }
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        return "channel closed by broker: " + std::to_string(m->reply_code) + " " + string_of(m->reply_text);
      }
      return "broker error (method " + std::to_string(reply.reply.id) + ")";
  }
  return "unknown RPC reply";
}

std::optional<std::string> header_text(const amqp_field_value_t& v) {
  switch (v.kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: return string_of(v.value.bytes);
    case AMQP_FIELD_KIND_BOOLEAN: return std::string(v.value.boolean ? "true" : "false");
    case AMQP_FIELD_KIND_I8: return std::to_string(v.value.i8);
    case AMQP_FIELD_KIND_U8: return std::to_string(v.value.u8);
    case AMQP_FIELD_KIND_I16: return std::to_string(v.value.i16);
    case AMQP_FIELD_KIND_U16: return std::to_string(v.value.u16);
    case AMQP_FIELD_KIND_I32: return std::to_string(v.value.i32);
    case AMQP_FIELD_KIND_U32: return std::to_string(v.value.u32);
    case AMQP_FIELD_KIND_I64: return std::to_string(v.value.i64);
    case AMQP_FIELD_KIND_U64: return std::to_string(v.value.u64);
    default: return std::nullopt;  // tables, arrays, floats: not part of our contract
  }
}

InboundMessage decode(const amqp_envelope_t& env) {
  InboundMessage m;
  m.delivery_tag = env.delivery_tag;
  Delivery& d = m.delivery;
  d.redelivered = env.redelivered != 0;
  d.exchange = string_of(env.exchange);
  d.routing_key = string_of(env.routing_key);
  d.body = string_of(env.message.body);
  const auto& p = env.message.properties;
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) m.message_id = string_of(p.message_id);
  if (p._flags & AMQP_BASIC_TYPE_FLAG) d.type = string_of(p.type);
  if (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) d.content_type = string_of(p.content_type);
  if (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) d.correlation_id = string_of(p.correlation_id);
  if (p._flags & AMQP_BASIC_TIMESTAMP_FLAG)
    d.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(static_cast<std::int64_t>(p.timestamp)));
  if (p._flags & AMQP_BASIC_HEADERS_FLAG)
    for (int i = 0; i < p.headers.num_entries; ++i)
      if (auto text = header_text(p.headers.entries[i].value)) d.headers[string_of(p.headers.entries[i].key)] = *text;
  return m;
}

}  // namespace

AmqpConsumer::AmqpConsumer(AmqpSettings settings) : settings_(std::move(settings)) {}

AmqpConsumer::~AmqpConsumer() { close(); }

void AmqpConsumer::drop() {
  if (conn_) amqp_destroy_connection(conn_);
  conn_ = nullptr;
}

void AmqpConsumer::check(amqp_rpc_reply_t reply, const std::string& what) {
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) return;
  std::string text = describe(reply);
  drop();
  throw AmqpError(what + " at " + endpoint_ + " failed: " + safe_text(text));
}

void AmqpConsumer::rpc(const std::string& what) { check(amqp_get_rpc_reply(conn_), what); }

void AmqpConsumer::check_status(int status, const char* what) {
  if (status == AMQP_STATUS_OK) return;
  drop();
  throw AmqpError(std::string(what) + " at " + endpoint_ + " failed: " + amqp_error_string2(status));
}

void AmqpConsumer::connect() {
  drop();
  std::string uri = settings_.uri;  // amqp_parse_url writes into its buffer
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(uri.data(), &info) != AMQP_STATUS_OK)
    throw AmqpError("amqp uri: not a valid amqp://user:password@host:port/vhost URI");
  if (info.ssl) throw AmqpError("amqp uri: amqps:// is not supported by this build");
  endpoint_ = std::string(info.host) + ":" + std::to_string(info.port) + "/" + info.vhost;

  conn_ = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
  if (!socket) {
    drop();
    throw AmqpError("cannot create a socket for " + endpoint_);
  }
  timeval tv = to_timeval(settings_.connect_timeout);
  int rc = amqp_socket_open_noblock(socket, info.host, info.port, &tv);
  if (rc != AMQP_STATUS_OK) {
    drop();
    throw AmqpError("cannot connect to " + endpoint_ + ": " + amqp_error_string2(rc));
  }
  amqp_set_handshake_timeout(conn_, &tv);
  amqp_set_rpc_timeout(conn_, &tv);

  amqp_table_entry_t props[1];
  props[0].key = amqp_cstring_bytes("connection_name");
  props[0].value.kind = AMQP_FIELD_KIND_UTF8;
  props[0].value.value.bytes = bytes_of(settings_.connection_name);
  amqp_table_t client_properties{1, props};
  check(amqp_login_with_properties(conn_, info.vhost, 0, 131072, settings_.heartbeat_s, &client_properties,
                                   AMQP_SASL_METHOD_PLAIN, info.user, info.password),
        "login");
  amqp_channel_open(conn_, 1);
  rpc("channel.open");
}

void AmqpConsumer::declare(const Topology& t) {
  amqp_exchange_declare(conn_, 1, bytes_of(t.dead_letter_exchange), amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
                        amqp_empty_table);
  rpc("declaring dead-letter exchange '" + safe_text(t.dead_letter_exchange) + "'");
  if (!t.dead_letter_queue.empty()) {
    amqp_queue_declare(conn_, 1, bytes_of(t.dead_letter_queue), 0, 1, 0, 0, amqp_empty_table);
    rpc("declaring dead-letter queue '" + safe_text(t.dead_letter_queue) + "'");
    amqp_queue_bind(conn_, 1, bytes_of(t.dead_letter_queue), bytes_of(t.dead_letter_exchange),
                    amqp_cstring_bytes(""), amqp_empty_table);
    rpc("binding dead-letter queue '" + safe_text(t.dead_letter_queue) + "'");
  }
  amqp_table_entry_t arg;
  arg.key = amqp_cstring_bytes("x-dead-letter-exchange");
  arg.value.kind = AMQP_FIELD_KIND_UTF8;
  arg.value.value.bytes = bytes_of(t.dead_letter_exchange);
  amqp_queue_declare(conn_, 1, bytes_of(t.queue), 0, 1, 0, 0, amqp_table_t{1, &arg});
  rpc("declaring queue '" + safe_text(t.queue) + "' with x-dead-letter-exchange '" +
      safe_text(t.dead_letter_exchange) + "' (an existing queue must have the same arguments)");
  for (const auto& b : t.bindings) {
    amqp_exchange_declare(conn_, 1, bytes_of(b.exchange), bytes_of(b.exchange_type), 0, 1, 0, 0, amqp_empty_table);
    rpc("declaring exchange '" + safe_text(b.exchange) + "' (" + safe_text(b.exchange_type) + ")");
    amqp_queue_bind(conn_, 1, bytes_of(t.queue), bytes_of(b.exchange), bytes_of(b.routing_key), amqp_empty_table);
    rpc("binding queue '" + safe_text(t.queue) + "' to '" + safe_text(b.exchange) + "'");
  }
}

void AmqpConsumer::consume(const std::string& queue, int prefetch) {
  amqp_basic_qos(conn_, 1, 0, static_cast<uint16_t>(prefetch), 0);
  rpc("basic.qos");
  amqp_basic_consume(conn_, 1, bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0, amqp_empty_table);
  rpc("consuming from queue '" + safe_text(queue) + "'");
}

std::optional<InboundMessage> AmqpConsumer::next(std::chrono::milliseconds timeout) {
  if (!conn_) throw AmqpError("not connected to " + endpoint_);
  amqp_maybe_release_buffers(conn_);
  amqp_envelope_t env;
  timeval tv = to_timeval(timeout);
  amqp_rpc_reply_t r = amqp_consume_message(conn_, &env, &tv, 0);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) {
    InboundMessage m = decode(env);
    amqp_destroy_envelope(&env);
    return m;
  }
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) return std::nullopt;
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
    handle_unexpected_frame();
    return std::nullopt;
  }
  check(r, "consuming");
  return std::nullopt;
}

// A method frame other than a delivery: a close or a cancel ends this connection.
void AmqpConsumer::handle_unexpected_frame() {
  amqp_frame_t frame;
  check_status(amqp_simple_wait_frame(conn_, &frame), "reading a frame");
  if (frame.frame_type != AMQP_FRAME_METHOD) return;
  const auto& method = frame.payload.method;
  std::string reason;
  if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* c = static_cast<amqp_channel_close_t*>(method.decoded);
    reason = "channel closed by broker: " + std::to_string(c->reply_code) + " " + string_of(c->reply_text);
    amqp_channel_close_ok_t ok{};
    amqp_send_method(conn_, frame.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
  } else if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* c = static_cast<amqp_connection_close_t*>(method.decoded);
    reason = "connection closed by broker: " + std::to_string(c->reply_code) + " " + string_of(c->reply_text);
    amqp_connection_close_ok_t ok{};
    amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
  } else if (method.id == AMQP_BASIC_CANCEL_METHOD) {
    reason = "consumer cancelled by the broker (queue deleted?)";
  } else {
    return;  // connection.blocked and friends: nothing to do for a consumer
  }
  drop();
  throw AmqpError(safe_text(reason) + " (" + endpoint_ + ")");
}

void AmqpConsumer::ack(std::uint64_t tag) {
  if (!conn_) throw AmqpError("ack: not connected to " + endpoint_);
  check_status(amqp_basic_ack(conn_, 1, tag, 0), "basic.ack");
}

void AmqpConsumer::requeue(std::uint64_t tag) {
  if (!conn_) throw AmqpError("nack: not connected to " + endpoint_);
  check_status(amqp_basic_nack(conn_, 1, tag, 0, /*requeue=*/1), "basic.nack");
}

void AmqpConsumer::dead_letter(std::uint64_t tag) {
  if (!conn_) throw AmqpError("reject: not connected to " + endpoint_);
  check_status(amqp_basic_reject(conn_, 1, tag, /*requeue=*/0), "basic.reject");
}

void AmqpConsumer::close() {
  if (!conn_) return;
  timeval tv = to_timeval(std::chrono::milliseconds(1000));
  amqp_set_rpc_timeout(conn_, &tv);
  amqp_channel_close(conn_, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  drop();
}

}  // namespace outbox::detail
