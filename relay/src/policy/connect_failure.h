#pragma once
// ConnectFailure: why the relay could not connect to a server, as a cause the
// metrics count and the log and /readyz name, and whether any retry can fix it.

#include <string>

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

// Classifies the client library's error text (libpq and rabbitmq-c give no code for
// a failed connection: libpq keeps the server's SQLSTATE of a refused login to
// itself, rabbitmq-c reports the broker's close as text). Only the libraries' own
// wording is read, never the relay's; an unknown text is "other", not permanent.
// Pure.
ConnectFailure classify_connect_failure(ConnectTarget target, const std::string& error);

// The line the log and /readyz give for a failed attempt: "PostgreSQL: <error>", and
// for a permanent one " (permanent: <cause>; no retry fixes this, ...)". Pure.
std::string describe_connect_failure(ConnectTarget target, const std::string& error, const ConnectFailure& kind);

}  // namespace relay
