#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// StateTransition: moves a row to a new state only from the expected state(s).

#include <pqxx/transaction_base>
#include <string>
#include <utility>
#include <vector>

#include "outbox/pqxx_compat.h"

namespace outbox {

enum class TransitionOutcome {
  kApplied,     // the row was in one of the expected states and now has the new one
  kNotApplied,  // no row in an expected state: already done (a duplicate) or stale
                // (a late, out-of-order message); nothing written
};

// A compare-and-set on a state column: `UPDATE t SET state = to WHERE key = $1 AND
// state = ANY(from)`. Feeding it the same event three times, or an old event after
// a newer one, leaves the state where the newest applicable event put it, because a
// transition only ever fires from the state it expects. The affected row count
// tells the outcome; no exception is used for control flow.
//
// Concurrency: two transactions moving the same row serialise on its row lock; the
// second re-checks the state after the first commits (READ COMMITTED), so only one
// of them applies.
//
// Thread safety: stateless after construction; share it, one transaction per thread.
class StateTransition {
 public:
  // Plain identifiers only; throws ValidationError naming the argument at fault.
  // The state column is compared as text, so text and enum columns both work.
  StateTransition(const std::string& schema, const std::string& table, const std::string& key_column,
                  const std::string& state_column);

  // `from` must not be empty. `key` is any libpqxx parameter (number, string...).
  template <typename Key>
  TransitionOutcome apply(pqxx::transaction_base& tx, const Key& key, const std::vector<std::string>& from,
                          const std::string& to) const {
    auto r = outbox::pgx::exec_params(tx, sql_, key, encode_states(from), to);
    return r.affected_rows() > 0 ? TransitionOutcome::kApplied : TransitionOutcome::kNotApplied;
  }

 private:
  static std::string encode_states(const std::vector<std::string>& from);
  std::string sql_;
};

}  // namespace outbox
