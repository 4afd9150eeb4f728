#include "amqp_test_client.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace testenv {

AmqpEndpoint amqp_endpoint_of(const std::string& uri) {
  std::vector<char> buffer(uri.begin(), uri.end());  // amqp_parse_url writes into it
  buffer.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buffer.data(), &info) != AMQP_STATUS_OK) throw std::runtime_error("bad AMQP URI");
  AmqpEndpoint e;
  e.host = info.host;
  e.port = info.port;
  e.vhost = info.vhost;
  e.user = info.user;
  e.password = info.password;
  return e;
}

AmqpTestClient::AmqpTestClient(const AmqpEndpoint& endpoint, std::string label) : label_(std::move(label)) {
  conn_ = amqp_new_connection();
  auto fail = [&](const std::string& what) {
    amqp_destroy_connection(conn_);
    conn_ = nullptr;
    throw std::runtime_error(label_ + ": " + what);
  };
  auto* socket = amqp_tcp_socket_new(conn_);
  const auto ms = endpoint.timeout.count();
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  const bool timed = ms > 0;
  const int opened = !socket ? AMQP_STATUS_SOCKET_ERROR
                     : timed ? amqp_socket_open_noblock(socket, endpoint.host.c_str(), endpoint.port, &tv)
                             : amqp_socket_open(socket, endpoint.host.c_str(), endpoint.port);
  if (opened != AMQP_STATUS_OK) fail("cannot connect to the broker");
  if (timed) {
    amqp_set_rpc_timeout(conn_, &tv);
    amqp_set_handshake_timeout(conn_, &tv);
  }
  if (amqp_login(conn_, endpoint.vhost.c_str(), 0, endpoint.frame_max, 0, AMQP_SASL_METHOD_PLAIN, endpoint.user.c_str(),
                 endpoint.password.c_str())
          .reply_type != AMQP_RESPONSE_NORMAL)
    fail("login failed");
  amqp_channel_open(conn_, 1);
  if (!last_ok()) fail("channel.open failed");
}

AmqpTestClient::~AmqpTestClient() {
  if (!conn_) return;
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn_);
}

void AmqpTestClient::abandon() {
  if (conn_) amqp_destroy_connection(conn_);
  conn_ = nullptr;
}

bool AmqpTestClient::last_ok() { return amqp_get_rpc_reply(conn_).reply_type == AMQP_RESPONSE_NORMAL; }

void AmqpTestClient::check(const std::string& what) {
  if (!last_ok()) throw std::runtime_error(label_ + ": " + what + " failed");
}

void AmqpTestClient::declare_exchange(const std::string& name, const std::string& type, bool durable, bool internal,
                                      amqp_table_t arguments) {
  amqp_exchange_declare(conn_, 1, amqp_bytes_of(name), amqp_bytes_of(type), 0, durable ? 1 : 0, 0, internal ? 1 : 0,
                        arguments);
  check("exchange.declare '" + name + "'");
}

void AmqpTestClient::declare_queue(const std::string& name, bool durable, amqp_table_t arguments) {
  amqp_queue_declare(conn_, 1, amqp_bytes_of(name), 0, durable ? 1 : 0, 0, 0, arguments);
  check("queue.declare '" + name + "'");
}

void AmqpTestClient::bind(const std::string& queue, const std::string& exchange, const std::string& routing_key) {
  amqp_queue_bind(conn_, 1, amqp_bytes_of(queue), amqp_bytes_of(exchange), amqp_bytes_of(routing_key),
                  amqp_empty_table);
  check("queue.bind '" + queue + "'");
}

std::optional<QueueCounts> AmqpTestClient::queue_counts(const std::string& queue) {
  auto* ok = amqp_queue_declare(conn_, 1, amqp_bytes_of(queue), 1, 0, 0, 0, amqp_empty_table);
  if (!last_ok() || !ok) return std::nullopt;
  return QueueCounts{ok->message_count, ok->consumer_count};
}

void AmqpTestClient::delete_queue(const std::string& queue) {
  amqp_queue_delete(conn_, 1, amqp_bytes_of(queue), 0, 0);
  amqp_get_rpc_reply(conn_);
}

void AmqpTestClient::delete_exchange(const std::string& exchange) {
  amqp_exchange_delete(conn_, 1, amqp_bytes_of(exchange), 0);
  amqp_get_rpc_reply(conn_);
}

}  // namespace testenv
