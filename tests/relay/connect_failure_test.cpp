// What a failed connection means: the cause the metrics count, and whether a retry
// can ever fix it (the log and /readyz say "permanent"). AMQP failures are decided on
// AmqpError's fields (rabbitmq-c's status, the broker's close, our socket diagnosis)
// whatever their text says; PostgreSQL's on libpq's text, the one place that reads it.
#include "policy/connect_failure.h"

#include <doctest/doctest.h>

#include "outbox/rabbitmq_c.h"

#include <string>

using outbox::amqp::AmqpError;
using outbox::amqp::BrokerClose;
using outbox::amqp::CloseScope;
using outbox::amqp::SocketCause;
using relay::classify_amqp_failure;
using relay::classify_postgres_failure;
using relay::ConnectFailure;
using relay::ConnectTarget;
using relay::describe_connect_failure;

namespace {

struct AmqpCase {
  const char* name;
  int status;
  BrokerClose close;
  SocketCause socket;
  const char* cause;
  bool permanent;
};

constexpr BrokerClose kNoClose{};
constexpr BrokerClose connection_close(std::uint16_t code, std::uint16_t class_id, std::uint16_t method_id) {
  return {CloseScope::kConnection, code, class_id, method_id};
}

// Text that names another cause than the fields, in every case: what() must not decide.
const char* const kMisleading =
    "cannot connect to mq-tls-ssl.internal:5300/ACCESS_REFUSED (TLS): connection refused, timed out, "
    "NOT_ALLOWED, cannot resolve";

}  // namespace

TEST_CASE("AMQP connect failures are classified on the error's fields, never on its text") {
  const AmqpCase cases[] = {
      // The broker's close of a login (connection.start-ok, 10/11): rabbitmq-c announces
      // authentication_failure_close, so RabbitMQ answers a wrong password with 403.
      {"login refused: 403 at start-ok", 0, connection_close(AMQP_ACCESS_REFUSED, 10, 11), SocketCause::kNone,
       "authentication", true},
      {"vhost missing or not permitted: 530 at connection.open", 0, connection_close(AMQP_NOT_ALLOWED, 10, 40),
       SocketCause::kNone, "vhost", true},
      {"the alternate exchange's passive declare refused: channel 403", 0,
       BrokerClose{CloseScope::kChannel, AMQP_ACCESS_REFUSED, 40, 10}, SocketCause::kNone, "authentication", true},
      // A broker that drops the socket instead of answering the login: nothing tells it
      // from any other loss, so it is not called permanent.
      {"socket closed during login", AMQP_STATUS_CONNECTION_CLOSED, kNoClose, SocketCause::kNone, "other", false},
      {"the alternate exchange missing: channel 404", 0, BrokerClose{CloseScope::kChannel, 404, 40, 10},
       SocketCause::kNone, "other", false},
      {"the node going away: 320", 0, connection_close(320, 0, 0), SocketCause::kNone, "other", false},
      {"name does not resolve (our diagnosis)", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kDns, "dns", false},
      {"name does not resolve (rabbitmq-c's status)", AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED, kNoClose,
       SocketCause::kConnects, "dns", false},
      {"nothing listens", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kRefused, "refused", false},
      {"nothing listens, though rabbitmq-c timed out", AMQP_STATUS_TIMEOUT, kNoClose, SocketCause::kRefused, "refused",
       false},
      {"no answer (our diagnosis)", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kTimeout, "timeout", false},
      {"no answer (rabbitmq-c's status, TCP connects now)", AMQP_STATUS_TIMEOUT, kNoClose, SocketCause::kConnects,
       "timeout", false},
      {"a TLS handshake that timed out", AMQP_STATUS_TIMEOUT, kNoClose, SocketCause::kTls, "timeout", false},
      {"a login that timed out", AMQP_STATUS_TIMEOUT, kNoClose, SocketCause::kNone, "timeout", false},
      {"heartbeats missed", AMQP_STATUS_HEARTBEAT_TIMEOUT, kNoClose, SocketCause::kNone, "timeout", false},
      {"TCP connects, the TLS handshake fails", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kTls, "tls", false},
      {"generic SSL error", AMQP_STATUS_SSL_ERROR, kNoClose, SocketCause::kNone, "tls", false},
      {"broker certificate refused", AMQP_STATUS_SSL_PEER_VERIFY_FAILED, kNoClose, SocketCause::kNone, "tls", false},
      {"broker certificate for another host", AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED, kNoClose, SocketCause::kNone,
       "tls", false},
      {"handshake failed", AMQP_STATUS_SSL_CONNECTION_FAILED, kNoClose, SocketCause::kNone, "tls", false},
      {"no route to the broker", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kUnreachable, "other", false},
      {"another socket error", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kOther, "other", false},
      {"plain TCP connects now: the failure passed", AMQP_STATUS_SOCKET_ERROR, kNoClose, SocketCause::kConnects,
       "other", false},
      {"a bad URI", AMQP_STATUS_BAD_URL, kNoClose, SocketCause::kNone, "other", false},
      {"no fields at all", 0, kNoClose, SocketCause::kNone, "other", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    AmqpError::Fields fields;
    fields.status = c.status;
    fields.close = c.close;
    fields.socket_cause = c.socket;
    for (const char* text : {"", kMisleading}) {
      CAPTURE(text);
      const auto f = classify_amqp_failure(AmqpError(text, fields));
      CHECK(std::string(f.cause) == c.cause);
      CHECK(f.permanent == c.permanent);
    }
  }
}

namespace {

struct PostgresCase {
  const char* error;
  const char* cause;
  bool permanent;
};

}  // namespace

TEST_CASE("PostgreSQL connect failures are classified on libpq's and the server's wording") {
  const PostgresCase cases[] = {
      {"connection to server at \"db\" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for user "
       "\"relay\"",
       "authentication", true},
      {"FATAL:  no pg_hba.conf entry for host \"10.0.0.9\", user \"relay\"", "authentication", true},
      {"FATAL:  role \"relay\" does not exist", "authentication", true},
      {"fe_sendauth: no password supplied", "authentication", true},
      {"FATAL:  database \"orders\" does not exist", "unknown_database", true},
      {"FATAL:  permission denied for database \"orders\"", "authentication", true},
      {"FATAL:  role \"relay\" is not permitted to log in", "authentication", true},
      {"connection to server at \"127.0.0.1\", port 5433 failed: Connection refused\n\tIs the server running",
       "refused", false},
      {"timeout expired", "timeout", false},
      {"could not translate host name \"db.internal\" to address: Name or service not known", "dns", false},
      {"FATAL:  the database system is starting up", "server_unavailable", false},
      {"FATAL:  sorry, too many clients already", "server_unavailable", false},
      {"SSL error: certificate verify failed", "tls", false},
      {"server closed the connection unexpectedly", "other", false},
      {"", "other", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.error);
    const auto f = classify_postgres_failure(c.error);
    CHECK(std::string(f.cause) == c.cause);
    CHECK(f.permanent == c.permanent);
  }
}

TEST_CASE("the log and /readyz line names the target, and says permanent only when it is") {
  CHECK(describe_connect_failure(ConnectTarget::kAmqp, "cannot connect to mq:5672/: a socket error occurred",
                                 ConnectFailure{"refused", false}) ==
        "AMQP: cannot connect to mq:5672/: a socket error occurred");
  CHECK(describe_connect_failure(ConnectTarget::kPostgres, "FATAL:  database \"orders\" does not exist",
                                 ConnectFailure{"unknown_database", true}) ==
        "PostgreSQL: FATAL:  database \"orders\" does not exist (permanent: unknown_database; no retry fixes this, "
        "fix the configuration or the server)");
}
