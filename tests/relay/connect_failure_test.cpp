// What each client library's connect error means: the cause the metrics count, and
// whether a retry can ever fix it (the log and /readyz say "permanent").
#include "policy/connect_failure.h"

#include <doctest/doctest.h>

#include <string>

using relay::classify_connect_failure;
using relay::ConnectTarget;

namespace {

struct Case {
  ConnectTarget target;
  const char* error;
  const char* cause;
  bool permanent;
};

}  // namespace

TEST_CASE("connect errors of libpq and rabbitmq-c are classified by cause, and those no retry fixes are permanent") {
  const Case cases[] = {
      {ConnectTarget::kPostgres,
       "connection to server at \"db\" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for user "
       "\"relay\"",
       "authentication", true},
      {ConnectTarget::kPostgres, "FATAL:  no pg_hba.conf entry for host \"10.0.0.9\", user \"relay\"", "authentication",
       true},
      {ConnectTarget::kPostgres, "FATAL:  role \"relay\" does not exist", "authentication", true},
      {ConnectTarget::kPostgres, "FATAL:  database \"orders\" does not exist", "unknown_database", true},
      {ConnectTarget::kPostgres, "FATAL:  permission denied for database \"orders\"", "authentication", true},
      {ConnectTarget::kPostgres,
       "connection to server at \"127.0.0.1\", port 5433 failed: Connection refused\n\tIs the server running",
       "refused", false},
      {ConnectTarget::kPostgres, "timeout expired", "timeout", false},
      {ConnectTarget::kPostgres, "could not translate host name \"db.internal\" to address: Name or service not known",
       "dns", false},
      {ConnectTarget::kPostgres, "FATAL:  the database system is starting up", "server_unavailable", false},
      {ConnectTarget::kPostgres, "SSL error: certificate verify failed", "tls", false},
      {ConnectTarget::kPostgres, "server closed the connection unexpectedly", "other", false},
      {ConnectTarget::kAmqp,
       "cannot log in to 127.0.0.1:5672/: ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN",
       "authentication", true},
      {ConnectTarget::kAmqp, "cannot open vhost 'orders' at mq:5672/orders: NOT_ALLOWED - vhost orders not found",
       "vhost", true},
      {ConnectTarget::kAmqp, "cannot connect to 127.0.0.1:1/: a socket error occurred (connection refused)", "refused",
       false},
      {ConnectTarget::kAmqp, "cannot connect to mq:5672/: request timed out (timed out after 2000 ms)", "timeout",
       false},
      {ConnectTarget::kAmqp,
       "cannot connect to mq.internal:5672/: a socket error occurred (cannot resolve 'mq.internal': Name or service "
       "not known)",
       "dns", false},
      {ConnectTarget::kAmqp, "cannot connect to mq:5671/ (TLS): a SSL error occurred", "tls", false},
      {ConnectTarget::kAmqp, "connection to broker lost: a socket error occurred", "other", false},
      // An endpoint whose port or vhost looks like a refusal is not one.
      {ConnectTarget::kAmqp, "cannot connect to mq:5300/vhost403: a socket error occurred (connection refused)",
       "refused", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.error);
    const auto f = classify_connect_failure(c.target, c.error);
    CHECK(std::string(f.cause) == c.cause);
    CHECK(f.permanent == c.permanent);
  }
}
