#pragma once
// PgResult: the rows of one statement run on a PgSession, read field by field.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct pg_result;  // libpq's PGresult

namespace relay {

// Owns one libpq result. Fields of a statement run with binary results are read
// with the typed accessors (int8, int4, float8, boolean, tid); bytes() gives any
// field's bytes as the server sent them (raw for bytea and text in binary form, the
// text form otherwise).
//
// Thread safety: immutable after construction; movable, not copyable.
class PgResult {
 public:
  PgResult() = default;  // no rows, no columns
  // Takes ownership of `res` (may be null: no rows).
  explicit PgResult(pg_result* res);
  ~PgResult();
  PgResult(PgResult&&) noexcept;
  PgResult& operator=(PgResult&&) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;

  int rows() const;
  int columns() const;
  // The rows an INSERT, UPDATE or DELETE affected (0 for other statements).
  std::size_t affected_rows() const;
  // The command tag ("COMMIT", "ROLLBACK", "UPDATE 3"), empty with no result.
  std::string command_tag() const;
  bool is_null(int row, int column) const;
  // The field's bytes, valid while this object lives.
  std::string_view bytes(int row, int column) const;
  // A bigint (int8) column in binary form: 8 bytes, network order. Throws
  // PgError kUsage naming the column otherwise (NULL included).
  std::int64_t int8(int row, int column) const;
  // integer (int4), double precision (float8) and boolean columns, likewise.
  std::int32_t int4(int row, int column) const;
  double float8(int row, int column) const;
  bool boolean(int row, int column) const;
  // A tid (a row version's address, as ctid): "(block,offset)", PostgreSQL's text form.
  std::string tid(int row, int column) const;
  // The number of the column named `name`; throws PgError kUsage if none is.
  int column(const char* name) const;

 private:
  struct Deleter {
    void operator()(pg_result* res) const;
  };
  std::unique_ptr<pg_result, Deleter> res_;
  // The field's bytes if it holds exactly `size` of them and is not NULL; else throws
  // PgError kUsage saying it is not a binary `what`.
  std::string_view fixed(int row, int column, std::size_t size, const char* what) const;
};

}  // namespace relay
