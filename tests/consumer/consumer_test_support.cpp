#include "consumer_test_support.h"

#include "outbox/rabbitmq_c.h"

#include <stdexcept>
#include <thread>

#include "test_env.h"

namespace testenv {
namespace {

void check(amqp_rpc_reply_t r, const std::string& what) {
  if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error("consumer test support: " + what + " failed");
}

amqp_connection_state_t open_connection() {
  std::string uri = amqp_uri();
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(uri.data(), &info) != AMQP_STATUS_OK) throw std::runtime_error("bad OUTBOX_AMQP_URI");
  auto conn = amqp_new_connection();
  if (amqp_socket_open(amqp_tcp_socket_new(conn), info.host, info.port) != AMQP_STATUS_OK)
    throw std::runtime_error("consumer test support: cannot connect to the broker");
  check(amqp_login(conn, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password), "login");
  amqp_channel_open(conn, 1);
  check(amqp_get_rpc_reply(conn), "channel.open");
  return conn;
}

void close_connection(amqp_connection_state_t conn) {
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
}

amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

}  // namespace

ConsumerTopology::ConsumerTopology(const std::string& prefix)
    : exchange(unique_name(prefix + "_x")),
      queue(unique_name(prefix + "_q")),
      dead_letter_exchange(unique_name(prefix + "_dlx")),
      dead_letter_queue(unique_name(prefix + "_dlq")) {}

ConsumerTopology::~ConsumerTopology() {
  try {
    auto conn = open_connection();
    for (const auto* q : {&queue, &dead_letter_queue}) {
      amqp_queue_delete(conn, 1, bytes_of(*q), 0, 0);
      amqp_get_rpc_reply(conn);
    }
    for (const auto* x : {&exchange, &dead_letter_exchange}) {
      amqp_exchange_delete(conn, 1, bytes_of(*x), 0);
      amqp_get_rpc_reply(conn);
    }
    close_connection(conn);
  } catch (...) {
  }
}

outbox::RunnerOptions ConsumerTopology::options(const std::string& schema, const std::string& consumer,
                                                int concurrency) const {
  outbox::RunnerOptions o;
  o.pg_dsn = pg_dsn();
  o.amqp_uri = amqp_uri();
  o.schema = schema;
  o.consumer = outbox::ConsumerName(consumer);
  o.queue = queue;
  o.bindings = {{exchange, routing_key, "direct"}};
  o.dead_letter_exchange = dead_letter_exchange;
  o.dead_letter_queue = dead_letter_queue;
  o.concurrency = concurrency;
  o.retry_delay = std::chrono::milliseconds(10);
  o.retry_delay_max = std::chrono::milliseconds(50);
  o.poll_interval = std::chrono::milliseconds(50);
  return o;
}

TestPublisher::TestPublisher() : conn_(open_connection()) {
  amqp_confirm_select(conn_, 1);
  check(amqp_get_rpc_reply(conn_), "confirm.select");
}

TestPublisher::~TestPublisher() { close_connection(conn_); }

void TestPublisher::publish(const std::string& exchange, const std::string& routing_key, const std::string& body,
                            const Options& o) {
  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  props.type = bytes_of(o.type);
  props.content_type = amqp_cstring_bytes("application/json");
  if (o.message_id) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = bytes_of(*o.message_id);
  }
  if (o.timestamp_unix_s) {
    props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    props.timestamp = *o.timestamp_unix_s;
  }
  if (amqp_basic_publish(conn_, 1, bytes_of(exchange), bytes_of(routing_key), 1, 0, &props, bytes_of(body)) !=
      AMQP_STATUS_OK)
    throw std::runtime_error("consumer test support: publish failed");
  for (;;) {  // a return (unroutable) comes before its ack: treat it as a test failure
    amqp_frame_t frame;
    if (amqp_simple_wait_frame(conn_, &frame) != AMQP_STATUS_OK)
      throw std::runtime_error("consumer test support: waiting for the confirm failed");
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) return;
    if (frame.payload.method.id == AMQP_BASIC_RETURN_METHOD)
      throw std::runtime_error("consumer test support: message returned unroutable (queue not bound yet?)");
    if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD)
      throw std::runtime_error("consumer test support: message nacked by the broker");
  }
}

QueueState queue_state(const std::string& queue) {
  auto conn = open_connection();
  auto* ok = amqp_queue_declare(conn, 1, bytes_of(queue), 1, 0, 0, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "queue.declare passive '" + queue + "'");
  QueueState s{ok->message_count, ok->consumer_count};
  close_connection(conn);
  return s;
}

std::uint32_t consumer_count(const std::string& queue) {
  try {
    return queue_state(queue).consumers;
  } catch (const std::runtime_error&) {
    return 0;
  }
}

void declare_plain_queue(const std::string& queue) {
  auto conn = open_connection();
  amqp_queue_declare(conn, 1, bytes_of(queue), 0, 1, 0, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "queue.declare '" + queue + "'");
  close_connection(conn);
}

int take_and_crash(const std::string& queue) {
  auto conn = open_connection();
  amqp_basic_consume(conn, 1, bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "basic.consume '" + queue + "'");
  amqp_envelope_t env;
  timeval wait{5, 0};
  int count = -1;
  if (amqp_consume_message(conn, &env, &wait, 0).reply_type == AMQP_RESPONSE_NORMAL) {
    count = 0;
    const auto& p = env.message.properties;
    if (p._flags & AMQP_BASIC_HEADERS_FLAG)
      for (int i = 0; i < p.headers.num_entries; ++i) {
        const auto& e = p.headers.entries[i];
        if (std::string(static_cast<const char*>(e.key.bytes), e.key.len) != "x-delivery-count") continue;
        const auto& v = e.value;
        count = v.kind == AMQP_FIELD_KIND_I64 ? static_cast<int>(v.value.i64)
              : v.kind == AMQP_FIELD_KIND_I32 ? v.value.i32
              : v.kind == AMQP_FIELD_KIND_U8  ? v.value.u8 : -2;
      }
    amqp_destroy_envelope(&env);
  }
  amqp_destroy_connection(conn);  // no ack, no close: as a process that died
  return count;
}

}  // namespace testenv
