#pragma once
// PgSession: a libpq connection the relay opens and owns, for its hot path.

#include <cstddef>
#include <string>
#include <vector>

#include "pg/pg_result.h"

struct pg_conn;  // libpq's PGconn

namespace relay {

// Why the relay talks to libpq itself here rather than through libpqxx: the claims
// and large payloads come back in PostgreSQL's binary format (a bytea in text form
// costs the server an escaping pass and the relay an unescaping pass over every
// byte: docs/perf/NOTEBOOK.md, "Big payloads"), and BEGIN travels with the claim and
// COMMIT with the mark in one pipeline each (one round trip fewer per statement
// pair). libpqxx 6.4 offers neither, and reaching its PGconn is not public API; so
// this session is opened and owned here, through libpq's public API only, and the
// rest of the relay (admin commands, migrations, the listener) keeps libpqxx.
//
// Errors are thrown as PgError (pg/pg_error.h): kSessionLost when the session is
// gone (or never opened), kStatement with the SQLSTATE when the server refused a
// statement (the transaction, if any, is then aborted), kInDoubt when a COMMIT was
// sent and its answer never came (it may or may not have committed: the rows may be
// published again). Every message is one line; a connect error never holds the
// password or a 4+ byte fragment of it.
//
// Statements are single commands with text parameters. Results are binary unless
// asked otherwise (PgResult's typed accessors read binary fields).
//
// Thread safety: none; one thread at a time, as any connection. Not copyable.
class PgSession {
 public:
  using Params = std::vector<std::string>;
  enum class Format { kText = 0, kBinary = 1 };

  // Connects with `dsn` (libpq keyword or URI form, as PgConnInfo parses it).
  // Throws std::invalid_argument when it does not parse (naming no value), and
  // PgError kSessionLost when the server cannot be reached or refuses the login.
  explicit PgSession(const std::string& dsn);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  // False once the server or the network ended the session.
  bool is_open() const;
  // Whether the session is encrypted (TLS). A Unix socket never is.
  bool ssl_in_use() const;
  int backend_pid() const;
  // "host:port/dbname", for logs (never the password).
  std::string endpoint() const;

  PgResult exec(const std::string& sql, const Params& params = {}, Format format = Format::kBinary);
  // Runs the statement prepare() made under `name`.
  PgResult exec_prepared(const std::string& name, const Params& params, Format format = Format::kBinary);
  // A protocol-level prepared statement: it outlives transactions, dies with the session.
  void prepare(const std::string& name, const std::string& sql);

  // BEGIN and then the prepared statement, in one pipeline (one round trip). If
  // BEGIN fails the statement is not run; if the statement fails, the transaction
  // BEGIN opened is left aborted, for its owner to roll back.
  PgResult begin_then(const std::string& name, const Params& params);
  // The prepared statement and then COMMIT, in one pipeline; returns the rows the
  // statement affected. The statement's error throws PgError kStatement and leaves the
  // transaction aborted; once COMMIT was sent, a lost session throws PgError
  // kInDoubt. REQUIRES: a transaction is open.
  std::size_t exec_then_commit(const std::string& name, const Params& params);

 private:
  pg_conn* conn_ = nullptr;
};

}  // namespace relay
