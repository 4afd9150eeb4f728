#pragma once
// Migrator: applies the embedded schema migrations to one PostgreSQL schema.

#include <string>
#include <vector>

namespace pqxx { class connection_base; }

namespace outbox {

// Applies every embedded migration not yet recorded in SCHEMA.outbox_migrations,
// in version order, in one transaction under a transaction-level advisory lock:
// two migrators at once are safe (the second waits, then finds nothing to do),
// and running it again is a no-op. Not thread-safe (uses the caller's connection).
class Migrator {
 public:
  // Throws ValidationError when `schema` is not a plain identifier.
  explicit Migrator(std::string schema);

  struct Result {
    std::vector<int> applied;  // versions applied by this call, ascending
    int version = 0;           // the schema's version afterwards
  };

  // REQUIRES: no transaction open on `conn`.
  Result migrate(pqxx::connection_base& conn) const;

  // As migrate, but applies only the versions up to `version`: a schema as an older
  // SDK left it (a staged rollout, or a test that needs rows written before a
  // migration). Calling migrate later applies the rest.
  Result migrate_to(pqxx::connection_base& conn, int version) const;

 private:
  std::string schema_;         // quoted
  std::string schema_name_;    // as given
};

}  // namespace outbox
