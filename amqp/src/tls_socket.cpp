#include "tls_socket.h"

#include "outbox/rabbitmq_c.h"
#include <openssl/ssl.h>

#include <string>

#include "outbox/amqp/amqp_error.h"

namespace outbox::amqp::detail {
namespace {

// OpenSSL's default asks for a passphrase on the terminal ("Enter PEM pass phrase:"),
// which blocks check-config --connect and a relay started by hand. Passphrases are not
// supported: this one fails at once and records that a key asked for one.
int refuse_passphrase(char*, int, int, void* asked) {
  if (asked) *static_cast<bool*>(asked) = true;
  return 0;
}

}  // namespace

amqp_socket_t* new_socket(amqp_connection_state_t conn, const Settings& s, bool tls) {
  if (!tls) {
    if (amqp_socket_t* socket = amqp_tcp_socket_new(conn)) return socket;
    throw AmqpError("cannot create a TCP socket");
  }
  amqp_socket_t* socket = amqp_ssl_socket_new(conn);
  if (!socket) throw AmqpError("cannot create a TLS socket");
  const std::string& k = s.key_prefix;
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, s.verify_hostname ? 1 : 0);
  if (amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST) != AMQP_STATUS_OK)
    throw AmqpError("amqp: cannot require TLS 1.2 or later");
  if (!s.ca_file.empty() && amqp_ssl_socket_set_cacert(socket, s.ca_file.c_str()) != AMQP_STATUS_OK)
    throw AmqpError(k + "ca_file: cannot load CA certificates from '" + s.ca_file + "'");
  if (s.ca_file.empty() &&
      SSL_CTX_set_default_verify_paths(static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket))) != 1)
    throw AmqpError("amqp: cannot load the system's CA certificates");
  if (s.cert_file.empty()) return socket;
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  bool asked = false;
  SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
  const bool loaded = amqp_ssl_socket_set_key(socket, s.cert_file.c_str(), s.key_file.c_str()) == AMQP_STATUS_OK;
  SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);  // `asked` goes out of scope
  if (asked)
    throw AmqpError(k + "key_file: '" + s.key_file +
                    "' is encrypted; give an unencrypted key (passphrases are not supported)");
  if (!loaded)
    throw AmqpError(k + "cert_file/key_file: cannot load the client certificate '" + s.cert_file + "' and its key");
  return socket;
}

}  // namespace outbox::amqp::detail
