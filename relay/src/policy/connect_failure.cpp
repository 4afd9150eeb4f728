#include "policy/connect_failure.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

namespace relay {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has_any(const std::string& text, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](const char* n) { return text.find(n) != std::string::npos; });
}

// libpq's messages (fe-connect.c) and the server's FATAL texts for a refused login.
ConnectFailure postgres(const std::string& t) {
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

// rabbitmq-c's texts, the broker's connection.close (reply text and code) and our
// own connect diagnosis (amqp/src/socket_cause.h) in parentheses.
ConnectFailure amqp(const std::string& t) {
  // The broker's reply names, not its codes or the word vhost: a port (5300) or a
  // vhost's name in the endpoint must not read as a refusal.
  if (has_any(t, {"access_refused", "login was refused"})) return {"authentication", true};
  if (t.find("not_allowed") != std::string::npos) return {"vhost", true};
  if (t.find("cannot resolve") != std::string::npos) return {"dns", false};
  if (t.find("connection refused") != std::string::npos) return {"refused", false};
  if (has_any(t, {"timed out", "timeout"})) return {"timeout", false};
  if (has_any(t, {"tls", "ssl", "certificate"})) return {"tls", false};
  return {};
}

}  // namespace

const char* target_label(ConnectTarget target) { return target == ConnectTarget::kPostgres ? "postgres" : "amqp"; }

std::string describe_connect_failure(ConnectTarget target, const std::string& error, const ConnectFailure& kind) {
  std::string line = std::string(target == ConnectTarget::kPostgres ? "PostgreSQL: " : "AMQP: ") + error;
  if (kind.permanent)
    line += " (permanent: " + std::string(kind.cause) + "; no retry fixes this, fix the configuration or the server)";
  return line;
}

ConnectFailure classify_connect_failure(ConnectTarget target, const std::string& error) {
  const auto t = lower(error);
  return target == ConnectTarget::kPostgres ? postgres(t) : amqp(t);
}

}  // namespace relay
