#pragma once
// PgBinaryQuery: one parameterised statement whose rows come back in PostgreSQL's
// binary format, on the libpq session of a libpqxx connection.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection_base>

namespace relay {

// Why: libpqxx 6.4 (Debian 12) asks for text results on every statement, and a
// bytea in text form costs PostgreSQL an escaping pass over every byte and the
// relay an unescaping pass (both measured: docs/PERFORMANCE.md, "Big payloads"
// and "Round three": byteaout was a fifth of the claim session's CPU even for
// 300 B payloads). The claims and the large payloads are fetched here instead, as
// raw bytes and binary numbers.
//
// The statement runs on the same session, so in the transaction libpqxx opened on
// it (the claim's, which holds the rows' locks). It is synchronous and consumes its
// whole result, so libpqxx's view of the session is unchanged afterwards. An error
// is thrown as the libpqxx exception libpqxx itself would throw (broken_connection,
// or sql_error with the SQLSTATE), so callers classify it as they do every other
// statement's. After an SQL error the transaction is aborted, as with libpqxx.
//
// Thread safety: as the connection's: one thread at a time.
class PgBinaryQuery {
 public:
  // REQUIRES: every parameter is in text form; `sql` selects only columns the
  // caller decodes from their binary forms.
  PgBinaryQuery(pqxx::connection_base& conn, const std::string& sql, const std::vector<std::string>& params);
  // Runs the statement prepare() made under `name` on this session.
  struct Prepared {
    std::string name;
  };
  PgBinaryQuery(pqxx::connection_base& conn, const Prepared& statement, const std::vector<std::string>& params);
  // As above, with BEGIN sent ahead of the statement in one pipeline: one round trip
  // for both (BatchTransaction). If BEGIN fails the statement is not run; if the
  // statement fails, the transaction BEGIN opened is left aborted, for its owner to
  // roll back. Throws as the constructor does.
  struct BeginFirst {};
  PgBinaryQuery(pqxx::connection_base& conn, const Prepared& statement, const std::vector<std::string>& params,
                BeginFirst);
  // Runs the prepared statement and then COMMIT in one pipeline (one round trip for
  // both: BatchTransaction::commit_after); returns how many rows the statement
  // affected. The statement's error throws pqxx::sql_error and leaves the
  // transaction aborted, for its owner to roll back; once COMMIT was sent, a lost
  // session throws pqxx::in_doubt_error (it may or may not have committed).
  // REQUIRES: a transaction is open on the session.
  static std::size_t exec_then_commit(pqxx::connection_base& conn, const Prepared& statement,
                                      const std::vector<std::string>& params);
  // Prepares `sql` as `name` on the session (a protocol-level statement: it outlives
  // the transaction, and dies with the session). Throws as the constructor does.
  static void prepare(pqxx::connection_base& conn, const std::string& name, const std::string& sql);
  ~PgBinaryQuery();
  PgBinaryQuery(const PgBinaryQuery&) = delete;
  PgBinaryQuery& operator=(const PgBinaryQuery&) = delete;

  int rows() const;
  int columns() const;
  bool is_null(int row, int column) const;
  // The field's bytes, valid while this object lives.
  std::string_view bytes(int row, int column) const;
  // A bigint (int8) column: 8 bytes, network order. Throws pqxx::conversion_error
  // naming the column otherwise.
  std::int64_t int8(int row, int column) const;
  // integer (int4), double precision (float8) and boolean columns, likewise.
  std::int32_t int4(int row, int column) const;
  double float8(int row, int column) const;
  bool boolean(int row, int column) const;
  // A tid (a row version's address, as ctid): "(block,offset)", PostgreSQL's text form.
  std::string tid(int row, int column) const;
  // The number of the column named `name`; throws pqxx::usage_error if none is.
  int column(const char* name) const;

 private:
  struct Result;
  std::unique_ptr<Result> result_;
  void check(pqxx::connection_base& conn, const std::string& what);
};

}  // namespace relay
