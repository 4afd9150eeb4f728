#pragma once
// new_socket: the TCP or TLS socket of one connection, with the relay's TLS rules.

#include "outbox/rabbitmq_c.h"

#include "outbox/amqp/settings.h"

namespace outbox::amqp::detail {

// A plain TCP socket, or when `tls` a TLS socket that always verifies the broker's
// certificate (against settings.ca_file, else the system's CA store) and, unless
// settings.verify_hostname is false, that it names the host; TLS 1.2 at least;
// the client certificate when cert_file is set. The socket belongs to `conn`.
// Throws AmqpError naming the setting at fault (file names, never secrets).
amqp_socket_t* new_socket(amqp_connection_state_t conn, const Settings& settings, bool tls);

}  // namespace outbox::amqp::detail
