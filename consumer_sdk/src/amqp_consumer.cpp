#include "amqp_consumer.h"

#include "outbox/rabbitmq_c.h"

#include "outbox/amqp/amqp_text.h"
#include "outbox/one_line.h"

namespace outbox::detail {

using outbox::amqp::bytes_of;
using outbox::amqp::string_of;
using outbox::amqp::to_timeval;

namespace {

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
  // Any 64-bit value can arrive; past system_clock's range (year 2262) the conversion
  // to its nanoseconds would overflow (a cast wrapped 2^64-1 to 1969): left absent.
  constexpr auto kLatest =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::time_point::max().time_since_epoch());
  if ((p._flags & AMQP_BASIC_TIMESTAMP_FLAG) && p.timestamp <= static_cast<std::uint64_t>(kLatest.count()))
    d.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(static_cast<std::int64_t>(p.timestamp)));
  if (p._flags & AMQP_BASIC_HEADERS_FLAG)
    for (int i = 0; i < p.headers.num_entries; ++i)
      if (auto text = header_text(p.headers.entries[i].value)) d.headers[string_of(p.headers.entries[i].key)] = *text;
  return m;
}

// A string table entry. REQUIRES: `value` outlives the entry.
amqp_table_entry_t utf8_entry(const char* key, const std::string& value) {
  amqp_table_entry_t e;
  e.key = amqp_cstring_bytes(key);
  e.value.kind = AMQP_FIELD_KIND_UTF8;
  e.value.value.bytes = bytes_of(value);
  return e;
}

}  // namespace

outbox::amqp::Settings amqp_settings(const RunnerOptions& o, const std::string& connection_name) {
  outbox::amqp::Settings s;
  s.uri = o.amqp_uri;
  s.uris = o.amqp_uris;
  s.order = o.amqp_endpoint_order;
  s.order_seed = std::hash<std::string>{}(connection_name);  // each worker its own shuffle
  s.key_prefix = "amqp_";
  s.heartbeat_s = o.heartbeat_s;
  s.connect_timeout_ms = static_cast<int>(o.connect_timeout.count());
  s.ca_file = o.amqp_ca_file;
  s.cert_file = o.amqp_cert_file;
  s.key_file = o.amqp_key_file;
  s.verify_hostname = o.amqp_verify_hostname;
  s.connection_name = connection_name;
  return s;
}

AmqpConsumer::AmqpConsumer(outbox::amqp::Settings settings) : conn_(std::move(settings)) {}

AmqpConsumer::~AmqpConsumer() { close(); }

void AmqpConsumer::rpc(const std::string& what) { conn_.check_rpc(what); }

void AmqpConsumer::connect() {
  conn_.open();
  conn_.open_channel(1);
}

void AmqpConsumer::declare(const Topology& t) {
  amqp_exchange_declare(conn_.get(), 1, bytes_of(t.dead_letter_exchange), amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
                        amqp_empty_table);
  rpc("declaring dead-letter exchange '" + one_line(t.dead_letter_exchange, 500) + "'");
  static const std::string kQuorum = "quorum";  // the entry borrows its bytes
  amqp_table_entry_t quorum = utf8_entry("x-queue-type", kQuorum);
  const bool is_quorum = t.queue_type == QueueType::kQuorum;
  if (!t.dead_letter_queue.empty()) {
    amqp_queue_declare(conn_.get(), 1, bytes_of(t.dead_letter_queue), 0, 1, 0, 0,
                       is_quorum ? amqp_table_t{1, &quorum} : amqp_empty_table);
    rpc("declaring dead-letter queue '" + one_line(t.dead_letter_queue, 500) + "'");
    amqp_queue_bind(conn_.get(), 1, bytes_of(t.dead_letter_queue), bytes_of(t.dead_letter_exchange),
                    amqp_cstring_bytes(""), amqp_empty_table);
    rpc("binding dead-letter queue '" + one_line(t.dead_letter_queue, 500) + "'");
  }
  std::vector<amqp_table_entry_t> args = {utf8_entry("x-dead-letter-exchange", t.dead_letter_exchange)};
  if (is_quorum) args.push_back(quorum);
  if (is_quorum && t.delivery_limit > 0) {
    amqp_table_entry_t limit;
    limit.key = amqp_cstring_bytes("x-delivery-limit");
    limit.value.kind = AMQP_FIELD_KIND_I64;
    limit.value.value.i64 = t.delivery_limit;
    args.push_back(limit);
  }
  amqp_queue_declare(conn_.get(), 1, bytes_of(t.queue), 0, 1, 0, 0,
                     amqp_table_t{static_cast<int>(args.size()), args.data()});
  rpc("declaring " + std::string(is_quorum ? "quorum" : "classic") + " queue '" + one_line(t.queue, 500) +
      "' with x-dead-letter-exchange '" + one_line(t.dead_letter_exchange, 500) +
      "' (an existing queue must have the same type and arguments)");
  for (const auto& b : t.bindings) {
    amqp_exchange_declare(conn_.get(), 1, bytes_of(b.exchange), bytes_of(b.exchange_type), 0, 1, 0, 0,
                          amqp_empty_table);
    rpc("declaring exchange '" + one_line(b.exchange, 500) + "' (" + one_line(b.exchange_type, 500) + ")");
    amqp_queue_bind(conn_.get(), 1, bytes_of(t.queue), bytes_of(b.exchange), bytes_of(b.routing_key), amqp_empty_table);
    rpc("binding queue '" + one_line(t.queue, 500) + "' to '" + one_line(b.exchange, 500) + "'");
  }
}

void AmqpConsumer::consume(const std::string& queue, int prefetch) {
  amqp_basic_qos(conn_.get(), 1, 0, static_cast<uint16_t>(prefetch), 0);
  rpc("basic.qos");
  amqp_basic_consume(conn_.get(), 1, bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0, amqp_empty_table);
  rpc("consuming from queue '" + one_line(queue, 500) + "'");
}

std::optional<InboundMessage> AmqpConsumer::next(std::chrono::milliseconds timeout) {
  if (!conn_.is_open()) throw AmqpError("not connected to " + endpoint());
  amqp_maybe_release_buffers(conn_.get());
  amqp_envelope_t env;
  timeval tv = to_timeval(timeout);
  amqp_rpc_reply_t r = amqp_consume_message(conn_.get(), &env, &tv, 0);
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
  conn_.check(r, "consuming");
  return std::nullopt;
}

// A method frame other than a delivery: a close or a cancel ends this connection.
void AmqpConsumer::handle_unexpected_frame() {
  amqp_frame_t frame;
  conn_.check_status(amqp_simple_wait_frame(conn_.get(), &frame), "reading a frame");
  if (frame.frame_type != AMQP_FRAME_METHOD) return;
  const auto& method = frame.payload.method;
  std::string reason;
  AmqpError::Fields fields;
  if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* c = static_cast<amqp_channel_close_t*>(method.decoded);
    fields.close = {outbox::amqp::CloseScope::kChannel, c->reply_code, c->class_id, c->method_id};
    reason = "channel closed by broker: " + std::to_string(c->reply_code) + " " + string_of(c->reply_text);
    amqp_channel_close_ok_t ok{};
    amqp_send_method(conn_.get(), frame.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
  } else if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* c = static_cast<amqp_connection_close_t*>(method.decoded);
    fields.close = {outbox::amqp::CloseScope::kConnection, c->reply_code, c->class_id, c->method_id};
    reason = "connection closed by broker: " + std::to_string(c->reply_code) + " " + string_of(c->reply_text);
    amqp_connection_close_ok_t ok{};
    amqp_send_method(conn_.get(), 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
  } else if (method.id == AMQP_BASIC_CANCEL_METHOD) {
    reason = "consumer cancelled by the broker (queue deleted?)";
  } else {
    return;  // connection.blocked and friends: nothing to do for a consumer
  }
  conn_.drop();
  throw AmqpError(one_line(reason, 500) + " (" + endpoint() + ")", fields);
}

void AmqpConsumer::ack(std::uint64_t tag) {
  if (!conn_.is_open()) throw AmqpError("ack: not connected to " + endpoint());
  conn_.check_status(amqp_basic_ack(conn_.get(), 1, tag, 0), "basic.ack");
}

void AmqpConsumer::requeue(std::uint64_t tag) {
  if (!conn_.is_open()) throw AmqpError("nack: not connected to " + endpoint());
  conn_.check_status(amqp_basic_nack(conn_.get(), 1, tag, 0, /*requeue=*/1), "basic.nack");
}

void AmqpConsumer::dead_letter(std::uint64_t tag) {
  if (!conn_.is_open()) throw AmqpError("reject: not connected to " + endpoint());
  conn_.check_status(amqp_basic_reject(conn_.get(), 1, tag, /*requeue=*/0), "basic.reject");
}

void AmqpConsumer::close() { conn_.close(1); }

}  // namespace outbox::detail
