#include "policy/connect_failure.h"

#include "outbox/rabbitmq_c.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

namespace relay {
namespace {

using outbox::amqp::SocketCause;

// rabbitmq-c numbers its TLS statuses from AMQP_STATUS_SSL_ERROR down (0.11 to
// -0x0204, later versions may add more below it, up to -0x02FF).
bool tls_status(int status) { return status <= AMQP_STATUS_SSL_ERROR && status > -0x0300; }

}  // namespace

ConnectFailure classify_amqp_failure(const outbox::amqp::AmqpError& error) {
  // The broker's verdict first: a login refused (rabbitmq-c announces
  // authentication_failure_close, so RabbitMQ sends connection.close 403 rather than
  // dropping the socket; a broker that drops it anyway leaves only
  // AMQP_STATUS_CONNECTION_CLOSED, which no field tells from an ordinary loss: other)
  // and a vhost that is missing or not permitted (530 at connection.open). A channel's
  // 403 while connecting (the alternate exchange's passive declare) is a permission
  // too.
  switch (error.close().reply_code) {
    case AMQP_ACCESS_REFUSED: return {"authentication", true};
    case AMQP_NOT_ALLOWED: return {"vhost", true};
    default: break;
  }
  // Then the socket, as our own TCP connection found it just after, and else the
  // library's status. A TLS handshake that timed out is a timeout, as a refused one is
  // refused: TLS is named only when nothing more precise is known.
  switch (error.socket_cause()) {
    case SocketCause::kDns: return {"dns", false};
    case SocketCause::kRefused: return {"refused", false};
    case SocketCause::kTimeout: return {"timeout", false};
    default: break;
  }
  const int status = error.status();
  if (status == AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED) return {"dns", false};
  if (status == AMQP_STATUS_TIMEOUT || status == AMQP_STATUS_HEARTBEAT_TIMEOUT) return {"timeout", false};
  if (error.socket_cause() == SocketCause::kTls || tls_status(status)) return {"tls", false};
  return {};
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has_any(const std::string& text, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](const char* n) { return text.find(n) != std::string::npos; });
}

}  // namespace

// THE ONLY PLACE IN THE RELAY WHERE AN ERROR'S TEXT DECIDES ANYTHING (here: the
// cause label and `permanent`, hence the backoff and the /readyz line). Every other
// decision on a failure reads a type, a SQLSTATE, a status or a reply code.
//
// Why text here: libpq gives no code for a connection that fails. A failed
// PQconnectdb leaves only PQerrorMessage: the server's SQLSTATE for a refused login
// (28P01, 28000, 3D000, 57P03, 53300) arrives in its ErrorResponse, which libpq
// folds into that message without handing out a PGresult to read the field from;
// socket, DNS and TLS failures are libpq's own words (fe-connect.c), and libpqxx
// passes the same text on. So libpq's and the server's wording is read, never the
// relay's; an unknown text is "other", not permanent.
ConnectFailure classify_postgres_failure(const std::string& libpq_message) {
  const auto t = lower(libpq_message);
  if (has_any(t, {"password authentication failed", "no pg_hba.conf entry", "authentication failed",
                  "peer authentication", "fe_sendauth: no password supplied"}) ||
      (t.find("role \"") != std::string::npos && t.find("does not exist") != std::string::npos))
    return {"authentication", true};
  if (t.find("database \"") != std::string::npos && t.find("does not exist") != std::string::npos)
    return {"unknown_database", true};
  if (has_any(t, {"permission denied for database", "not permitted to log in"})) return {"authentication", true};
  if (t.find("could not translate host name") != std::string::npos) return {"dns", false};
  if (t.find("connection refused") != std::string::npos) return {"refused", false};
  if (has_any(t, {"timeout expired", "timed out"})) return {"timeout", false};
  if (has_any(t, {"ssl", "certificate", "tls"})) return {"tls", false};
  if (has_any(t, {"the database system is starting up", "the database system is shutting down",
                  "the database system is in recovery mode", "session is read-only", "server is in hot standby",
                  "too many clients", "remaining connection slots"}))
    return {"server_unavailable", false};
  return {};
}

const char* target_label(ConnectTarget target) { return target == ConnectTarget::kPostgres ? "postgres" : "amqp"; }

std::string describe_connect_failure(ConnectTarget target, const std::string& error, const ConnectFailure& kind) {
  std::string line = std::string(target == ConnectTarget::kPostgres ? "PostgreSQL: " : "AMQP: ") + error;
  if (kind.permanent)
    line += " (permanent: " + std::string(kind.cause) + "; no retry fixes this, fix the configuration or the server)";
  return line;
}

}  // namespace relay
