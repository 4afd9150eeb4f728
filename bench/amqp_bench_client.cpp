#include "amqp_bench_client.h"

#include "outbox/rabbitmq_c.h"

#include <ctime>

#include "outbox/amqp/amqp_text.h"

namespace bench {

using outbox::amqp::bytes_of;
using outbox::amqp::to_timeval;

namespace {

outbox::amqp::Settings bench_settings(const std::string& uri) {
  outbox::amqp::Settings s;
  s.uri = uri;
  s.uri_key = "OUTBOX_AMQP_URI";
  s.heartbeat_s = 0;
  s.connection_name = "outbox-bench";
  return s;
}

}  // namespace

AmqpBenchClient::AmqpBenchClient(const std::string& uri) : conn_(bench_settings(uri)) {
  conn_.open();
  conn_.open_channel(1);
}

AmqpBenchClient::~AmqpBenchClient() { conn_.close(1); }

void AmqpBenchClient::declare(const std::string& exchange, const std::string& queue, const std::string& routing_key,
                              bool quorum) {
  amqp_exchange_declare(conn_.get(), 1, bytes_of(exchange), amqp_cstring_bytes("direct"), 0, 1, 0, 0, amqp_empty_table);
  conn_.check_rpc("exchange.declare " + exchange);
  amqp_table_entry_t type;
  type.key = amqp_cstring_bytes("x-queue-type");
  type.value.kind = AMQP_FIELD_KIND_UTF8;
  type.value.value.bytes = amqp_cstring_bytes("quorum");
  amqp_queue_declare(conn_.get(), 1, bytes_of(queue), 0, 1, 0, 0, quorum ? amqp_table_t{1, &type} : amqp_empty_table);
  conn_.check_rpc("queue.declare " + queue);
  amqp_queue_bind(conn_.get(), 1, bytes_of(queue), bytes_of(exchange), bytes_of(routing_key), amqp_empty_table);
  conn_.check_rpc("queue.bind");
}

void AmqpBenchClient::remove(const std::string& exchange, const std::string& queue) {
  amqp_queue_delete(conn_.get(), 1, bytes_of(queue), 0, 0);
  conn_.check_rpc("queue.delete " + queue);
  amqp_exchange_delete(conn_.get(), 1, bytes_of(exchange), 0);
  conn_.check_rpc("exchange.delete " + exchange);
}

void AmqpBenchClient::remove_queue(const std::string& queue) {
  amqp_queue_delete(conn_.get(), 1, bytes_of(queue), 0, 0);
  conn_.check_rpc("queue.delete " + queue);
}

void AmqpBenchClient::purge(const std::string& queue) {
  amqp_queue_purge(conn_.get(), 1, bytes_of(queue));
  conn_.check_rpc("queue.purge " + queue);
}

std::uint32_t AmqpBenchClient::depth(const std::string& queue) {
  auto* ok = amqp_queue_declare(conn_.get(), 1, bytes_of(queue), 1, 0, 0, 0, amqp_empty_table);
  conn_.check_rpc("queue.declare (passive) " + queue);
  return ok->message_count;
}

void AmqpBenchClient::confirm_select() {
  amqp_confirm_select(conn_.get(), 1);
  conn_.check_rpc("confirm.select");
  next_tag_ = 1;
}

std::uint64_t AmqpBenchClient::publish(const std::string& exchange, const std::string& routing_key,
                                       const std::string& message_id, std::int64_t outbox_id, const std::string& body,
                                       const WireShape& shape) {
  amqp_table_entry_t id_entry;
  id_entry.key = amqp_cstring_bytes("x-outbox-id");
  id_entry.value.kind = AMQP_FIELD_KIND_I64;
  id_entry.value.value.i64 = outbox_id;
  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.content_type = amqp_cstring_bytes("application/json");
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  if (shape.message_id) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = bytes_of(message_id);
  }
  if (shape.type_timestamp) {
    props._flags |= AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG;
    props.type = amqp_cstring_bytes("BenchEvent");
    props.timestamp = static_cast<uint64_t>(std::time(nullptr));
  }
  if (shape.row_id_header) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = amqp_table_t{1, &id_entry};
  }
  int rc = amqp_basic_publish(conn_.get(), 1, bytes_of(exchange), bytes_of(routing_key), shape.mandatory ? 1 : 0, 0,
                              &props, bytes_of(body));
  if (rc != AMQP_STATUS_OK) throw BenchError(std::string("AMQP publish failed: ") + amqp_error_string2(rc));
  return next_tag_++;
}

std::optional<AmqpBenchClient::Confirm> AmqpBenchClient::next_confirm(std::chrono::milliseconds timeout) {
  for (;;) {
    amqp_connection_state_t conn = conn_.get();
    if (!amqp_frames_enqueued(conn) && !amqp_data_in_buffer(conn)) amqp_maybe_release_buffers(conn);
    amqp_frame_t frame;
    timeval tv = to_timeval(timeout);
    int rc = amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT) return std::nullopt;
    if (rc != AMQP_STATUS_OK) throw BenchError(std::string("AMQP connection lost: ") + amqp_error_string2(rc));
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        auto* a = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        return Confirm{a->delivery_tag, a->multiple != 0, false};
      }
      case AMQP_BASIC_NACK_METHOD: {
        auto* n = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
        return Confirm{n->delivery_tag, n->multiple != 0, true};
      }
      case AMQP_BASIC_RETURN_METHOD: throw BenchError("the broker returned a bench message as unroutable");
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD: throw BenchError("the broker closed the bench publisher's channel");
      default: continue;
    }
  }
}

void AmqpBenchClient::consume(const std::string& queue) {
  amqp_basic_consume(conn_.get(), 1, bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/1, 0, amqp_empty_table);
  conn_.check_rpc("basic.consume " + queue);
}

std::optional<Delivery> AmqpBenchClient::next_delivery(std::chrono::milliseconds timeout) {
  amqp_maybe_release_buffers(conn_.get());
  amqp_envelope_t envelope;
  timeval tv = to_timeval(timeout);
  amqp_rpc_reply_t reply = amqp_consume_message(conn_.get(), &envelope, &tv, 0);
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT)
    return std::nullopt;
  conn_.check(reply, "consume");
  Delivery d{"", std::chrono::system_clock::now()};
  const auto& p = envelope.message.properties;
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
    d.message_id.assign(static_cast<const char*>(p.message_id.bytes), p.message_id.len);
  amqp_destroy_envelope(&envelope);
  return d;
}

}  // namespace bench
