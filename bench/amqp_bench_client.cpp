#include "amqp_bench_client.h"

#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <ctime>

namespace bench {
namespace {

amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

}  // namespace

AmqpBenchClient::AmqpBenchClient(const std::string& uri) {
  std::string buf = uri;
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK)
    throw BenchError("OUTBOX_AMQP_URI is not a valid amqp:// URI");
  conn_ = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
  timeval tv = to_timeval(std::chrono::milliseconds(5000));
  if (!socket || amqp_socket_open_noblock(socket, info.host, info.port, &tv) != AMQP_STATUS_OK) {
    amqp_destroy_connection(conn_);
    throw BenchError(std::string("cannot connect to the broker at ") + info.host + ":" +
                     std::to_string(info.port));
  }
  amqp_set_rpc_timeout(conn_, &tv);
  check(amqp_login(conn_, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password),
        "login");
  amqp_channel_open(conn_, 1);
  check(amqp_get_rpc_reply(conn_), "channel.open");
}

AmqpBenchClient::~AmqpBenchClient() {
  if (!conn_) return;
  timeval tv = to_timeval(std::chrono::milliseconds(1000));
  amqp_set_rpc_timeout(conn_, &tv);
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn_);
}

void AmqpBenchClient::check(amqp_rpc_reply_t reply, const std::string& what) {
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) return;
  std::string detail = reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                           ? amqp_error_string2(reply.library_error)
                           : "refused by the broker";
  throw BenchError("AMQP " + what + " failed: " + detail);
}

void AmqpBenchClient::declare(const std::string& exchange, const std::string& queue,
                              const std::string& routing_key) {
  amqp_exchange_declare(conn_, 1, bytes_of(exchange), amqp_cstring_bytes("direct"), 0, 1, 0, 0,
                        amqp_empty_table);
  check(amqp_get_rpc_reply(conn_), "exchange.declare " + exchange);
  amqp_queue_declare(conn_, 1, bytes_of(queue), 0, 1, 0, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn_), "queue.declare " + queue);
  amqp_queue_bind(conn_, 1, bytes_of(queue), bytes_of(exchange), bytes_of(routing_key), amqp_empty_table);
  check(amqp_get_rpc_reply(conn_), "queue.bind");
}

void AmqpBenchClient::remove(const std::string& exchange, const std::string& queue) {
  amqp_queue_delete(conn_, 1, bytes_of(queue), 0, 0);
  check(amqp_get_rpc_reply(conn_), "queue.delete " + queue);
  amqp_exchange_delete(conn_, 1, bytes_of(exchange), 0);
  check(amqp_get_rpc_reply(conn_), "exchange.delete " + exchange);
}

void AmqpBenchClient::purge(const std::string& queue) {
  amqp_queue_purge(conn_, 1, bytes_of(queue));
  check(amqp_get_rpc_reply(conn_), "queue.purge " + queue);
}

std::uint32_t AmqpBenchClient::depth(const std::string& queue) {
  auto* ok = amqp_queue_declare(conn_, 1, bytes_of(queue), 1, 0, 0, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn_), "queue.declare (passive) " + queue);
  return ok->message_count;
}

void AmqpBenchClient::confirm_select() {
  amqp_confirm_select(conn_, 1);
  check(amqp_get_rpc_reply(conn_), "confirm.select");
  next_tag_ = 1;
}

std::uint64_t AmqpBenchClient::publish(const std::string& exchange, const std::string& routing_key,
                                       const std::string& message_id, std::int64_t outbox_id,
                                       const std::string& body) {
  amqp_table_entry_t id_entry;
  id_entry.key = amqp_cstring_bytes("x-outbox-id");
  id_entry.value.kind = AMQP_FIELD_KIND_I64;
  id_entry.value.value.i64 = outbox_id;
  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
                 AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG;
  props.content_type = amqp_cstring_bytes("application/json");
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  props.message_id = bytes_of(message_id);
  props.type = amqp_cstring_bytes("BenchEvent");
  props.timestamp = static_cast<uint64_t>(std::time(nullptr));
  props.headers = amqp_table_t{1, &id_entry};
  int rc = amqp_basic_publish(conn_, 1, bytes_of(exchange), bytes_of(routing_key), 1, 0, &props,
                              bytes_of(body));
  if (rc != AMQP_STATUS_OK) throw BenchError(std::string("AMQP publish failed: ") + amqp_error_string2(rc));
  return next_tag_++;
}

std::optional<AmqpBenchClient::Confirm> AmqpBenchClient::next_confirm(std::chrono::milliseconds timeout) {
  for (;;) {
    if (!amqp_frames_enqueued(conn_) && !amqp_data_in_buffer(conn_)) amqp_maybe_release_buffers(conn_);
    amqp_frame_t frame;
    timeval tv = to_timeval(timeout);
    int rc = amqp_simple_wait_frame_noblock(conn_, &frame, &tv);
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
      case AMQP_BASIC_RETURN_METHOD:
        throw BenchError("the broker returned a bench message as unroutable");
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD:
        throw BenchError("the broker closed the bench publisher's channel");
      default:
        continue;
    }
  }
}

void AmqpBenchClient::consume(const std::string& queue) {
  amqp_basic_consume(conn_, 1, bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/1, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn_), "basic.consume " + queue);
}

std::optional<Delivery> AmqpBenchClient::next_delivery(std::chrono::milliseconds timeout) {
  amqp_maybe_release_buffers(conn_);
  amqp_envelope_t envelope;
  timeval tv = to_timeval(timeout);
  amqp_rpc_reply_t reply = amqp_consume_message(conn_, &envelope, &tv, 0);
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT)
    return std::nullopt;
  check(reply, "consume");
  Delivery d{"", std::chrono::system_clock::now()};
  const auto& p = envelope.message.properties;
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
    d.message_id.assign(static_cast<const char*>(p.message_id.bytes), p.message_id.len);
  amqp_destroy_envelope(&envelope);
  return d;
}

}  // namespace bench
