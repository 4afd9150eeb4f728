#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// NaturalKeyInsert: inserts a business row only if its business key is new.

#include <pqxx/transaction_base>
#include <string>
#include <utility>
#include <vector>

#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"

namespace outbox {

enum class InsertOutcome {
  kInserted,       // the key was new: the row is written (visible at commit)
  kAlreadyExists,  // a committed row has this key: nothing written
};

// Deduplicates on what the message is about (an order id), not on which message
// carried it, so the same business fact sent twice under two message ids still
// has one effect. Runs `INSERT ... ON CONFLICT (key columns) DO NOTHING` and reads
// the affected row count: no exception is used for control flow, and the
// transaction stays usable either way.
//
// Concurrency: like the inbox, an insert whose key another transaction has just
// inserted waits for it; that commit gives kAlreadyExists, a rollback kInserted.
//
// Thread safety: stateless after construction; share it, one transaction per thread.
// REQUIRES: a unique constraint or index on exactly `key_columns` (else PostgreSQL
// raises "no unique or exclusion constraint matching the ON CONFLICT specification").
class NaturalKeyInsert {
 public:
  // Names must be plain identifiers ([a-z_][a-z0-9_]*); every key column must be one
  // of `columns`. Throws ValidationError naming the argument and value at fault.
  NaturalKeyInsert(const std::string& schema, const std::string& table, const std::vector<std::string>& columns,
                   const std::vector<std::string>& key_columns);

  // One value per column, in the order given to the constructor.
  template <typename... Values>
  InsertOutcome insert(pqxx::transaction_base& tx, Values&&... values) const {
    if (sizeof...(Values) != column_count_)
      throw ValidationError("values", "expected " + std::to_string(column_count_) + " values for " + table_ + ", got " +
                                          std::to_string(sizeof...(Values)));
    auto r = outbox::pgx::exec_params(tx, sql_, std::forward<Values>(values)...);
    return r.affected_rows() == 1 ? InsertOutcome::kInserted : InsertOutcome::kAlreadyExists;
  }

  const std::string& sql() const { return sql_; }

 private:
  std::string table_;
  std::size_t column_count_;
  std::string sql_;
};

}  // namespace outbox
