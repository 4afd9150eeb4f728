#include "config/tls_policy.h"
#include "config/doc_paths.h"

namespace relay {

std::string TlsPolicy::pg_sslmode(const outbox::PgConnInfo& dsn, const char* pgsslmode_env) {
  if (auto mode = dsn.get("sslmode")) return *mode;
  if (pgsslmode_env && *pgsslmode_env) return pgsslmode_env;
  return "prefer";
}

bool TlsPolicy::amqp_verified(const AmqpConfig& amqp) {
  return amqp.uri.rfind("amqps://", 0) == 0 && amqp.verify_hostname;
}

std::optional<std::string> TlsPolicy::pg_refusal(const std::string& sslmode) {
  if (pg_verified(sslmode)) return std::nullopt;
  std::string why = "is true, but postgres.dsn uses sslmode=" + sslmode;
  if (sslmode == "verify-ca") why += " (the certificate's host name is not checked)";
  return why + ": set sslmode=verify-full (and sslrootcert) in the DSN";
}

std::optional<std::string> TlsPolicy::amqp_refusal(const AmqpConfig& amqp, std::string& key) {
  if (amqp.uri.rfind("amqps://", 0) != 0) {
    key = "amqp.require_tls";
    return "is true, but amqp.uri is a plain amqp:// URI: use amqps://";
  }
  if (!amqp.verify_hostname) {
    key = "amqp.verify_hostname";
    return "is false, but amqp.require_tls is true: the broker's certificate must name its host";
  }
  return std::nullopt;
}

std::optional<std::string> TlsPolicy::unverified_warning(bool pg_verified, const std::string& sslmode,
                                                         const AmqpConfig& amqp) {
  std::string what;
  if (!pg_verified) what = "postgres (sslmode=" + sslmode + ")";
  if (!amqp_verified(amqp)) {
    if (!what.empty()) what += " and ";
    what += amqp.uri.rfind("amqps://", 0) == 0 ? "amqp (verify_hostname: false)" : "amqp (plain amqp://)";
  }
  if (what.empty()) return std::nullopt;
  return "the server is not verified for " + what +
         ": a network attacker can read or change the traffic; use sslmode=verify-full, amqps:// and "
         "require_tls: true (OPERATIONS.md, \"TLS\", " +
         kDocsWhere + ")";
}

}  // namespace relay
