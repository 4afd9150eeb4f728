#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// PgConnInfo: a PostgreSQL connection string (keyword form or URI) exactly as libpq
// parses it, and the keyword string handed to libpq (the relay and the consumer SDK).

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace outbox {

// Parsed with libpq's own parser (PQconninfoParse), so the relay sees what the
// driver will use: percent-decoded URI parts, the last of a repeated keyword, quoted
// values kept whole. Environment defaults (PGSSLMODE, PGHOST, ...) are not applied.
// to_string() writes every value single-quoted and escaped, so no value (a password
// holding spaces, quotes, @ or =) can change how the string is split.
// A value type; not thread-safe for concurrent mutation.
class PgConnInfo {
 public:
  // Throws std::invalid_argument when libpq cannot parse `dsn`. The message quotes
  // option names only, never a value (any value may hold the password).
  static PgConnInfo parse(const std::string& dsn);

  // The value of a keyword libpq would use, or nullopt when the string does not set it.
  std::optional<std::string> get(const std::string& keyword) const;
  // Sets (replaces) a keyword.
  void set(const std::string& keyword, const std::string& value);
  // Sets a keyword only when the string does not set it (the user's choice wins).
  void set_default(const std::string& keyword, const std::string& value);
  // True when the string was written as a postgres:// or postgresql:// URI.
  bool was_uri() const { return uri_; }

  // `keyword='value' ...`, in libpq's keyword order; backslash and quote escaped.
  std::string to_string() const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
  bool uri_ = false;
};

// Expands the ${NAME} references in a connection string template (the relay's
// postgres.dsn) with `lookup`, so that no inserted text changes how libpq splits the
// string. In keyword form, a reference in an unquoted value makes that value literal
// text, written back single-quoted and escaped when it is empty or holds a space, a
// quote or a backslash: password=${file:/s} passes the file's bytes as they are. A reference
// inside a value the template quotes itself ('${X}') is inserted as is, so it must be
// escaped already; text that would end the quote early is refused. Elsewhere (a
// key, the whole string, any part of a URI) the text is inserted as is. Throws
// std::invalid_argument naming the reference, never the text it stands for.
std::string expand_conninfo_template(const std::string& tmpl,
                                     const std::function<std::string(const std::string& name)>& lookup);

}  // namespace outbox
