#include "amqp_admin.h"

#include "outbox/rabbitmq_c.h"

#include <stdexcept>

namespace chaos {

AmqpAdmin::AmqpAdmin(const std::string& host, std::uint16_t port) {
  conn_ = amqp_new_connection();
  auto* socket = amqp_tcp_socket_new(conn_);
  timeval tv{5, 0};
  if (!socket || amqp_socket_open_noblock(socket, host.c_str(), port, &tv) != AMQP_STATUS_OK) {
    amqp_destroy_connection(conn_);
    throw std::runtime_error("admin: cannot connect to the broker");
  }
  amqp_set_rpc_timeout(conn_, &tv);
  if (amqp_login(conn_, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest").reply_type !=
      AMQP_RESPONSE_NORMAL) {
    amqp_destroy_connection(conn_);
    throw std::runtime_error("admin: login failed");
  }
  amqp_channel_open(conn_, 1);
  check("channel.open");
}

AmqpAdmin::~AmqpAdmin() {
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn_);
}

void AmqpAdmin::check(const char* what) {
  if (amqp_get_rpc_reply(conn_).reply_type != AMQP_RESPONSE_NORMAL)
    throw std::runtime_error(std::string("admin: ") + what + " failed");
}

void AmqpAdmin::declare(const Topology& t) {
  auto b = [](const std::string& s) { return amqp_cstring_bytes(s.c_str()); };
  amqp_exchange_declare(conn_, 1, b(t.exchange), amqp_cstring_bytes("direct"), 0, 1, 0, 0, amqp_empty_table);
  check("exchange.declare");
  amqp_table_entry_t quorum;
  quorum.key = amqp_cstring_bytes("x-queue-type");
  quorum.value.kind = AMQP_FIELD_KIND_UTF8;
  quorum.value.value.bytes = amqp_cstring_bytes("quorum");
  amqp_queue_declare(conn_, 1, b(t.queue), 0, 1, 0, 0, t.quorum ? amqp_table_t{1, &quorum} : amqp_empty_table);
  check("queue.declare");
  amqp_table_entry_t args[2];
  args[0].key = amqp_cstring_bytes("x-max-length");
  args[0].value.kind = AMQP_FIELD_KIND_I32;
  args[0].value.value.i32 = t.limited_max_length;
  args[1].key = amqp_cstring_bytes("x-overflow");
  args[1].value.kind = AMQP_FIELD_KIND_UTF8;
  args[1].value.value.bytes = amqp_cstring_bytes("reject-publish");
  amqp_queue_declare(conn_, 1, b(t.limited_queue), 0, 1, 0, 0, amqp_table_t{2, args});
  check("queue.declare (limited)");
  amqp_queue_bind(conn_, 1, b(t.queue), b(t.exchange), amqp_cstring_bytes("order"), amqp_empty_table);
  check("queue.bind");
  amqp_queue_bind(conn_, 1, b(t.limited_queue), b(t.exchange), amqp_cstring_bytes("limited"), amqp_empty_table);
  check("queue.bind (limited)");
}

void AmqpAdmin::declare_late_exchange(const Topology& t) {
  auto b = [](const std::string& s) { return amqp_cstring_bytes(s.c_str()); };
  amqp_exchange_declare(conn_, 1, b(t.late_exchange), amqp_cstring_bytes("direct"), 0, 1, 0, 0, amqp_empty_table);
  check("exchange.declare (late)");
  amqp_queue_bind(conn_, 1, b(t.queue), b(t.late_exchange), amqp_cstring_bytes("late"), amqp_empty_table);
  check("queue.bind (late)");
}

std::uint32_t AmqpAdmin::ready(const std::string& queue) {
  auto* ok = amqp_queue_declare(conn_, 1, amqp_cstring_bytes(queue.c_str()), 1, 0, 0, 0, amqp_empty_table);
  check("queue.declare passive");
  return ok->message_count;
}

}  // namespace chaos
