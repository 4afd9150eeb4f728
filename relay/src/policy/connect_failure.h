#pragma once
// ConnectFailure: why the relay could not connect to a server, as a cause the
// metrics count and the log and /readyz name, and whether any retry can fix it.

#include <string>

#include "outbox/amqp/amqp_error.h"

namespace relay {

enum class ConnectTarget { kPostgres, kAmqp };

// Label `target` of outbox_relay_connect_failures_total: "postgres", "amqp".
const char* target_label(ConnectTarget target);

struct ConnectFailure {
  // Label `cause`: refused, timeout, dns, tls, authentication, unknown_database,
  // vhost, server_unavailable, other.
  const char* cause = "other";
  // No retry fixes it: the credentials, the database, the vhost or its permissions
  // are wrong. The relay still retries (an operator may fix it while it runs), but
  // says so in the log and on /readyz.
  bool permanent = false;
};

// A failed AMQP connection, decided on the error's fields (rabbitmq-c's status, the
// broker's close, our socket diagnosis), never on its text: the broker's reply code
// (403 ACCESS_REFUSED: authentication, 530 NOT_ALLOWED: vhost; both permanent), then
// the socket's cause or the library's status (dns, refused, timeout, tls). Anything
// else is "other", not permanent. Pure.
ConnectFailure classify_amqp_failure(const outbox::amqp::AmqpError& error);

// A failed PostgreSQL connection, from libpq's message: the one decision on error
// text in the relay (see connect_failure.cpp for why). Pure.
ConnectFailure classify_postgres_failure(const std::string& libpq_message);

// The line the log and /readyz give for a failed attempt: "PostgreSQL: <error>", and
// for a permanent one " (permanent: <cause>; no retry fixes this, ...)". Pure.
std::string describe_connect_failure(ConnectTarget target, const std::string& error, const ConnectFailure& kind);

}  // namespace relay
