#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// MigrationSteps: a migration file split into what runs inside its transaction and
// the index builds that must run outside one (CREATE INDEX CONCURRENTLY).

#include <string>
#include <string_view>
#include <vector>

namespace outbox {

// One index a migration builds without blocking writers. In the file it is the
// statement after a marker line
//   -- outbox-migrate: concurrently index=NAME table=TABLE
// up to the first line that ends in ';'. The statement must be
// CREATE INDEX CONCURRENTLY IF NOT EXISTS NAME ON {{schema}}.TABLE ...
struct ConcurrentIndex {
  std::string index;      // the index's name (unqualified)
  std::string table;      // the table it is built on (unqualified)
  std::string statement;  // as written, with {{schema}} placeholders
  // The same statement without CONCURRENTLY, for a build inside the migration's
  // transaction (a small table: the lock lasts milliseconds).
  std::string in_transaction_statement() const;
};

// A migration's SQL split by the markers. Pure; thread-safe.
struct MigrationSteps {
  std::vector<ConcurrentIndex> indexes;  // in file order
  std::string transactional;             // everything else, in file order

  // Throws ValidationError naming the migration and the line when a marker is
  // malformed or its statement is not the index build it names.
  static MigrationSteps parse(std::string_view sql, std::string_view migration_name);
};

}  // namespace outbox
