#pragma once
// TlsPolicy: whether each connection verifies the server it talks to, decided on the
// settings the drivers will actually use, and what require_tls accepts.

#include <optional>
#include <string>

#include "config/config.h"
#include "outbox/pg_conninfo.h"

namespace relay {

// Pure functions, no state; thread-safe.
// PostgreSQL: only sslmode=verify-full checks both the certificate chain and that it
// names the host (verify-ca skips the name, require and prefer check nothing, prefer
// and allow fall back to plaintext). AMQP: only amqps:// with amqp.verify_hostname
// (the peer certificate is always verified on amqps://).
class TlsPolicy {
 public:
  // The sslmode libpq will use: the connection string's (the last one written, as
  // libpq reads it), else `pgsslmode_env` (PGSSLMODE; may be null), else "prefer".
  static std::string pg_sslmode(const outbox::PgConnInfo& dsn, const char* pgsslmode_env);
  static bool pg_verified(const std::string& sslmode) { return sslmode == "verify-full"; }
  static bool amqp_verified(const AmqpConfig& amqp);

  // Why postgres.require_tls refuses this sslmode, or nullopt.
  static std::optional<std::string> pg_refusal(const std::string& sslmode);
  // Why amqp.require_tls refuses these settings, or nullopt; `key` is set to the
  // key at fault (amqp.uri or amqp.verify_hostname).
  static std::optional<std::string> amqp_refusal(const AmqpConfig& amqp, std::string& key);

  // One warning line naming the connection(s) whose server is not verified, or
  // nullopt when both are. Never holds a value of the connection strings.
  static std::optional<std::string> unverified_warning(bool pg_verified, const std::string& sslmode,
                                                       const AmqpConfig& amqp);
};

}  // namespace relay
