#include "amqp_admin.h"

#include <chrono>
#include <stdexcept>

namespace chaos {
namespace {

testenv::AmqpEndpoint endpoint(const std::string& host, std::uint16_t port) {
  testenv::AmqpEndpoint e;  // guest/guest, vhost "/"
  e.host = host;
  e.port = port;
  e.timeout = std::chrono::seconds(5);
  return e;
}

}  // namespace

AmqpAdmin::AmqpAdmin(const std::string& host, std::uint16_t port) : client_(endpoint(host, port), "admin") {}

AmqpAdmin::~AmqpAdmin() = default;

void AmqpAdmin::declare(const Topology& t) {
  client_.declare_exchange(t.exchange, "direct", /*durable=*/true);
  amqp_table_entry_t quorum;
  quorum.key = amqp_cstring_bytes("x-queue-type");
  quorum.value.kind = AMQP_FIELD_KIND_UTF8;
  quorum.value.value.bytes = amqp_cstring_bytes("quorum");
  client_.declare_queue(t.queue, /*durable=*/true, t.quorum ? amqp_table_t{1, &quorum} : amqp_empty_table);
  amqp_table_entry_t args[2];
  args[0].key = amqp_cstring_bytes("x-max-length");
  args[0].value.kind = AMQP_FIELD_KIND_I32;
  args[0].value.value.i32 = t.limited_max_length;
  args[1].key = amqp_cstring_bytes("x-overflow");
  args[1].value.kind = AMQP_FIELD_KIND_UTF8;
  args[1].value.value.bytes = amqp_cstring_bytes("reject-publish");
  client_.declare_queue(t.limited_queue, /*durable=*/true, amqp_table_t{2, args});
  client_.bind(t.queue, t.exchange, "order");
  client_.bind(t.limited_queue, t.exchange, "limited");
}

void AmqpAdmin::declare_late_exchange(const Topology& t) {
  client_.declare_exchange(t.late_exchange, "direct", /*durable=*/true);
  client_.bind(t.queue, t.late_exchange, "late");
}

std::uint32_t AmqpAdmin::ready(const std::string& queue) {
  const auto counts = client_.queue_counts(queue);
  if (!counts) throw std::runtime_error("admin: queue.declare passive failed");
  return counts->ready;
}

}  // namespace chaos
