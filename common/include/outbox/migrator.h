#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Migrator: applies the embedded schema migrations to one PostgreSQL schema.

#include <string>
#include <string_view>
#include <vector>

#include "outbox/pqxx_compat.h"

namespace outbox {

struct ConcurrentIndex;

// Applies every embedded migration not yet recorded in SCHEMA.outbox_migrations, in
// version order, each in a transaction of its own together with its record (with
// lock_timeout 10 s: a long transaction on the outbox fails the run, which can be
// repeated, instead of queueing every producer behind the migration), under a
// session advisory lock on the schema: two migrators at once are safe (the second
// waits, then finds nothing to do), and running it again is a no-op.
//
// Safe on a live table: an index a migration marks (outbox/migration_steps.h) is
// built with CREATE INDEX CONCURRENTLY outside the transaction, before the rest of
// its migration, when its table is at least concurrent_index_min_bytes (total
// size); writers are not blocked while it builds. An INVALID index of that name, left
// by a build that was cut off, is dropped and built again; a valid one is kept. A
// smaller table builds the index inside the migration's transaction: the lock lasts
// milliseconds, and CONCURRENTLY would wait for every older transaction in the
// database. Not thread-safe (uses the caller's connection).
class Migrator {
 public:
  // Throws ValidationError when `schema` is not a plain identifier.
  explicit Migrator(std::string schema);

  struct Result {
    std::vector<int> applied;  // versions applied by this call, ascending
    int version = 0;           // the schema's version afterwards
  };

  // REQUIRES: no transaction open on `conn`.
  Result migrate(outbox::PgConnection& conn) const;

  // As migrate, but applies only the versions up to `version`: a schema as an older
  // SDK left it (a staged rollout, or a test that needs rows written before a
  // migration). Calling migrate later applies the rest.
  Result migrate_to(outbox::PgConnection& conn, int version) const;

  // Tables of at least this many bytes get their marked indexes built concurrently
  // (default 1 MiB, a few thousand outbox rows). 0: always.
  Migrator& concurrent_index_min_bytes(long long bytes) {
    concurrent_index_min_bytes_ = bytes;
    return *this;
  }

 private:
  void apply(outbox::PgConnection& conn, int version, std::string_view name, std::string_view sql) const;
  bool builds_concurrently(outbox::PgConnection& conn, const ConcurrentIndex& index) const;

  std::string schema_;       // quoted
  std::string schema_name_;  // as given
  long long concurrent_index_min_bytes_ = 1 << 20;
};

}  // namespace outbox
