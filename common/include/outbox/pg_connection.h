#pragma once
// open_pg_connection: opens a PostgreSQL connection from a user's connection
// string without letting its password out. The relay and the consumer SDK share it.

#include <memory>
#include <string>

#include <pqxx/connection>

namespace outbox {

// Parses `dsn` (keyword form or URI) with libpq's own parser (PgConnInfo) and
// connects with its keyword form, so the driver sees exactly what was checked.
// Throws std::invalid_argument when libpq cannot parse it (naming options only,
// never a value). libpq's connection errors may quote host names and other parts of
// the string; when the connection fails, the exception's text is scrubbed of the
// password and of any 4+ byte fragment of it (SecretScrubber) and rethrown as the
// same pqxx type (broken_connection, sql_error with its SQLSTATE, or failure).
// Thread-safe.
std::unique_ptr<pqxx::connection> open_pg_connection(const std::string& dsn);

}  // namespace outbox
