#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// open_pg_connection: opens a PostgreSQL connection from a user's connection
// string without letting its password out. The relay and the consumer SDK share it.

#include <memory>
#include <pqxx/connection>
#include <pqxx/except>
#include <string>

#include "outbox/pg_conninfo.h"

namespace outbox {

namespace detail {
// Call only inside a catch block for pqxx::failure thrown while connecting with
// `info`: rethrows that exception as the same pqxx type (broken_connection,
// sql_error with its SQLSTATE, or failure) with its text scrubbed of info's
// password and of any 4+ byte fragment of it (SecretScrubber).
[[noreturn]] void rethrow_connect_error_without_password(const PgConnInfo& info);
}  // namespace detail

// Parses `dsn` (keyword form or URI) with libpq's own parser (PgConnInfo) and
// constructs a `Connection` (pqxx::connection, or a class of the caller's built
// from a libpq keyword string) with its keyword form, so the driver sees exactly
// what was checked. Throws std::invalid_argument when libpq cannot parse it (naming
// options only, never a value). libpq's connection errors may quote host names and
// other parts of the string; when the connection fails, the exception's text is
// scrubbed of the password and of any 4+ byte fragment of it (SecretScrubber) and
// rethrown as the same pqxx type (broken_connection, sql_error with its SQLSTATE, or
// failure). Thread-safe.
template <class Connection>
std::unique_ptr<Connection> open_pg_connection_as(const std::string& dsn) {
  const auto info = PgConnInfo::parse(dsn);
  try {
    return std::make_unique<Connection>(info.to_string());
  } catch (const pqxx::failure&) {
    detail::rethrow_connect_error_without_password(info);
  }
}

// open_pg_connection_as<pqxx::connection>.
std::unique_ptr<pqxx::connection> open_pg_connection(const std::string& dsn);

}  // namespace outbox
