#pragma once
// connect_postgres, open_relay_session: open a relay session without letting the
// password out.

#include <memory>
#include <pqxx/connection>

#include "config/config.h"
#include "pg/pg_session.h"

namespace relay {

// A libpqxx connection (admin commands, housekeeping, the listener): connects with
// dsn_with_session_options(config) through outbox::open_pg_connection: when the
// connection fails, the exception's text is scrubbed of the password and of any 4+
// byte fragment of it and rethrown as the same pqxx type (broken_connection, or
// sql_error with its SQLSTATE). With postgres.require_tls, throws PreflightError
// when the session is not encrypted (require_tls_session). Thread-safe.
std::unique_ptr<pqxx::connection> connect_postgres(const PostgresConfig& config);

// The same for the relay's claim sessions (PgSession, libpq's own): same options,
// same scrubbing, same TLS rule. Thread-safe.
std::unique_ptr<PgSession> open_relay_session(const PostgresConfig& config);

}  // namespace relay
