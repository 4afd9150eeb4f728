#include "outbox/amqp/connection.h"

#include "outbox/rabbitmq_c.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "outbox/amqp/amqp_error.h"
#include "outbox/amqp/amqp_text.h"
#include "outbox/amqp/amqp_uri.h"
#include "outbox/error_text.h"
#include "outbox/one_line.h"
#include "socket_cause.h"
#include "tls_socket.h"

namespace outbox::amqp {
namespace {

amqp_table_entry_t boolean_entry(const std::string& key) {
  amqp_table_entry_t e;
  e.key = bytes_of(key);
  e.value.kind = AMQP_FIELD_KIND_BOOLEAN;
  e.value.value.boolean = 1;
  return e;
}

}  // namespace

AmqpConnection::AmqpConnection(Settings settings)
    : settings_(std::move(settings)),
      rotation_(std::max<std::size_t>(settings_.uris.size(), 1), settings_.order, settings_.order_seed) {}

std::pair<const std::string*, std::string> AmqpConnection::next_uri() {
  if (settings_.uris.empty())
    return {&settings_.uri, settings_.uri_key.empty() ? settings_.key_prefix + "uri" : settings_.uri_key};
  current_ = rotation_.next();
  return {&settings_.uris[current_], settings_.key_prefix + "uris[" + std::to_string(current_) + "]"};
}

AmqpConnection::~AmqpConnection() { drop(); }

void AmqpConnection::drop() {
  if (conn_) amqp_destroy_connection(conn_);
  conn_ = nullptr;
}

int AmqpConnection::socket() const { return conn_ ? amqp_get_sockfd(conn_) : -1; }

void AmqpConnection::open() {
  drop();
  const auto [text, key] = next_uri();
  const AmqpUri uri = AmqpUri::parse(*text, key);
  endpoint_ = uri.endpoint();
  tls_ = uri.tls();
  conn_ = amqp_new_connection();
  amqp_socket_t* socket = nullptr;
  try {
    socket = detail::new_socket(conn_, settings_, uri.tls());
  } catch (const AmqpError&) {
    drop();
    throw;
  }
  timeval tv = to_timeval(std::chrono::milliseconds(settings_.connect_timeout_ms));
  int rc = amqp_socket_open_noblock(socket, uri.host().c_str(), uri.port(), &tv);
  if (rc != AMQP_STATUS_OK) {
    drop();
    std::string why = amqp_error_string2(rc);
    auto fields = AmqpError::Fields::of_status(rc);
    // rabbitmq-c's status does not say why a socket failed: find out.
    if (rc == AMQP_STATUS_SOCKET_ERROR || rc == AMQP_STATUS_TIMEOUT || rc == AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED) {
      const auto found = detail::diagnose_socket(uri.host(), uri.port(),
                                                 std::chrono::milliseconds(settings_.connect_timeout_ms), uri.tls());
      fields.socket_cause = found.cause;
      if (!found.text.empty()) why += " (" + found.text + ")";
    }
    throw AmqpError("cannot connect to " + endpoint_ + (uri.tls() ? " (TLS)" : "") + ": " + why, fields);
  }
  if (settings_.send_timeout_ms > 0) {
    // Before the login: a broker that stops reading mid-handshake is bounded too.
    const unsigned int ms = static_cast<unsigned int>(settings_.send_timeout_ms);
    ::setsockopt(amqp_get_sockfd(conn_), IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  }
  amqp_set_handshake_timeout(conn_, &tv);
  amqp_set_rpc_timeout(conn_, &tv);

  // rabbitmq-c merges these with its own (product, version, its capabilities).
  std::vector<amqp_table_entry_t> caps;
  for (const auto& name : settings_.capabilities) caps.push_back(boolean_entry(name));
  std::vector<amqp_table_entry_t> props;
  if (!caps.empty()) {
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes("capabilities");
    e.value.kind = AMQP_FIELD_KIND_TABLE;
    e.value.value.table = amqp_table_t{static_cast<int>(caps.size()), caps.data()};
    props.push_back(e);
  }
  if (!settings_.connection_name.empty()) {
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes("connection_name");
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = bytes_of(settings_.connection_name);
    props.push_back(e);
  }
  amqp_table_t client_properties{static_cast<int>(props.size()), props.data()};
  check(amqp_login_with_properties(conn_, uri.vhost().c_str(), 0, settings_.frame_max, settings_.heartbeat_s,
                                   &client_properties, AMQP_SASL_METHOD_PLAIN, uri.user().c_str(),
                                   uri.password().c_str()),
        "login");
  rotation_.connected(current_);
}

void AmqpConnection::open_channel(amqp_channel_t channel) {
  amqp_channel_open(conn_, channel);
  check_rpc("channel.open");
}

void AmqpConnection::check(amqp_rpc_reply_t reply, const std::string& what) {
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) return;
  // Both read before drop(): a broker's close lives in the connection's buffers.
  std::string text = describe(reply);
  const auto fields = fields_of(reply);
  drop();
  throw AmqpError(what + " at " + endpoint_ + " failed: " + one_line(text), fields);
}

void AmqpConnection::check_rpc(const std::string& what) {
  if (!conn_) throw AmqpError(what + ": not connected to " + endpoint_);
  check(amqp_get_rpc_reply(conn_), what);
}

void AmqpConnection::check_status(int status, const std::string& what) {
  if (status == AMQP_STATUS_OK) return;
  drop();
  throw AmqpError(what + " at " + endpoint_ + " failed: " + amqp_error_string2(status),
                  AmqpError::Fields::of_status(status));
}

void AmqpConnection::close(amqp_channel_t channel) {
  if (!conn_) return;
  timeval tv = to_timeval(std::chrono::milliseconds(1000));
  amqp_set_rpc_timeout(conn_, &tv);
  if (channel != 0) amqp_channel_close(conn_, channel, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  drop();
}

}  // namespace outbox::amqp
