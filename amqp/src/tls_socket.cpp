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
    throw AmqpError("cannot create a TCP socket",
                    AmqpError::Fields::of_status(AMQP_STATUS_NO_MEMORY));  // its only failure
  }
  // Where rabbitmq-c or OpenSSL give no status, the failure is its TLS layer's all
  // the same: AMQP_STATUS_SSL_ERROR, as rabbitmq-c itself reports those.
  amqp_socket_t* socket = amqp_ssl_socket_new(conn);
  if (!socket) throw AmqpError("cannot create a TLS socket", AmqpError::Fields::of_status(AMQP_STATUS_SSL_ERROR));
  const std::string& k = s.key_prefix;
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, s.verify_hostname ? 1 : 0);
  if (const int rc = amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST); rc != AMQP_STATUS_OK)
    throw AmqpError("amqp: cannot require TLS 1.2 or later", AmqpError::Fields::of_status(rc));
  if (const int rc = s.ca_file.empty() ? AMQP_STATUS_OK : amqp_ssl_socket_set_cacert(socket, s.ca_file.c_str());
      rc != AMQP_STATUS_OK)
    throw AmqpError(k + "ca_file: cannot load CA certificates from '" + s.ca_file + "'",
                    AmqpError::Fields::of_status(rc));
  if (s.ca_file.empty() &&
      SSL_CTX_set_default_verify_paths(static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket))) != 1)
    throw AmqpError("amqp: cannot load the system's CA certificates",
                    AmqpError::Fields::of_status(AMQP_STATUS_SSL_ERROR));
  if (s.cert_file.empty()) return socket;
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  bool asked = false;
  SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
  const int rc = amqp_ssl_socket_set_key(socket, s.cert_file.c_str(), s.key_file.c_str());
  SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);  // `asked` goes out of scope
  if (asked)
    throw AmqpError(k + "key_file: '" + s.key_file +
                        "' is encrypted; give an unencrypted key (passphrases are not supported)",
                    AmqpError::Fields::of_status(rc == AMQP_STATUS_OK ? AMQP_STATUS_SSL_ERROR : rc));
  if (rc != AMQP_STATUS_OK)
    throw AmqpError(k + "cert_file/key_file: cannot load the client certificate '" + s.cert_file + "' and its key",
                    AmqpError::Fields::of_status(rc));
  return socket;
}

}  // namespace outbox::amqp::detail
