#include "consumer_test_support.h"

#include "outbox/rabbitmq_c.h"

#include <stdexcept>
#include <thread>

#include "test_env.h"

namespace testenv {
namespace {

AmqpTestClient open_client() { return AmqpTestClient(shared_amqp_endpoint(), "consumer test support"); }

}  // namespace

ConsumerTopology::ConsumerTopology(const std::string& prefix)
    : exchange(unique_name(prefix + "_x")),
      queue(unique_name(prefix + "_q")),
      dead_letter_exchange(unique_name(prefix + "_dlx")),
      dead_letter_queue(unique_name(prefix + "_dlq")) {}

ConsumerTopology::~ConsumerTopology() {
  try {
    auto client = open_client();
    for (const auto* q : {&queue, &dead_letter_queue}) client.delete_queue(*q);
    for (const auto* x : {&exchange, &dead_letter_exchange}) client.delete_exchange(*x);
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

TestPublisher::TestPublisher() : client_(shared_amqp_endpoint(), "consumer test support") {
  amqp_confirm_select(client_.conn(), 1);
  client_.check("confirm.select");
}

TestPublisher::~TestPublisher() = default;

void TestPublisher::publish(const std::string& exchange, const std::string& routing_key, const std::string& body,
                            const Options& o) {
  amqp_connection_state_t conn = client_.conn();
  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
  props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  props.type = amqp_bytes_of(o.type);
  props.content_type = amqp_cstring_bytes("application/json");
  if (o.message_id) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = amqp_bytes_of(*o.message_id);
  }
  if (o.timestamp_unix_s) {
    props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    props.timestamp = *o.timestamp_unix_s;
  }
  std::vector<amqp_table_entry_t> entries;
  for (const auto& [k, v] : o.headers) {
    amqp_table_entry_t e;
    e.key = amqp_bytes_of(k);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_bytes_of(v);
    entries.push_back(e);
  }
  for (const auto& [k, v] : o.int_headers) {
    amqp_table_entry_t e;
    e.key = amqp_bytes_of(k);
    e.value.kind = AMQP_FIELD_KIND_I64;
    e.value.value.i64 = v;
    entries.push_back(e);
  }
  if (!entries.empty()) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers.num_entries = static_cast<int>(entries.size());
    props.headers.entries = entries.data();
  }
  if (amqp_basic_publish(conn, 1, amqp_bytes_of(exchange), amqp_bytes_of(routing_key), 1, 0, &props,
                         amqp_bytes_of(body)) != AMQP_STATUS_OK)
    throw std::runtime_error("consumer test support: publish failed");
  for (;;) {  // a return (unroutable) comes before its ack: treat it as a test failure
    amqp_frame_t frame;
    if (amqp_simple_wait_frame(conn, &frame) != AMQP_STATUS_OK)
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
  const auto counts = open_client().queue_counts(queue);
  if (!counts) throw std::runtime_error("consumer test support: queue.declare passive '" + queue + "' failed");
  return QueueState{counts->ready, counts->consumers};
}

std::uint32_t consumer_count(const std::string& queue) {
  try {
    return queue_state(queue).consumers;
  } catch (const std::runtime_error&) {
    return 0;
  }
}

void declare_plain_queue(const std::string& queue) { open_client().declare_queue(queue, /*durable=*/true); }

int take_and_crash(const std::string& queue) {
  auto client = open_client();
  amqp_connection_state_t conn = client.conn();
  amqp_basic_consume(conn, 1, amqp_bytes_of(queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0, amqp_empty_table);
  client.check("basic.consume '" + queue + "'");
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
        count = v.kind == AMQP_FIELD_KIND_I64   ? static_cast<int>(v.value.i64)
                : v.kind == AMQP_FIELD_KIND_I32 ? v.value.i32
                : v.kind == AMQP_FIELD_KIND_U8  ? v.value.u8
                                                : -2;
      }
    amqp_destroy_envelope(&env);
  }
  client.abandon();  // no ack, no close: as a process that died
  return count;
}

}  // namespace testenv
