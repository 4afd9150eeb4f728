#pragma once
// BatchTransaction: the claim transaction of one batch, whose BEGIN travels with its
// first statement.

#include <cstddef>
#include <string>
#include <vector>

#include <pqxx/dbtransaction>

namespace relay {

// Why: each round trip to PostgreSQL costs both processes a wake-up and a few
// system calls, which on the 2-core VMs we measure on is most of a small batch's
// PostgreSQL CPU (docs/PERFORMANCE.md, "Round six"). pqxx::work sends BEGIN on
// its own when it is constructed; this transaction sends it in one pipeline with
// the claim (OutboxStore::run_claim, through PgBinaryQuery), one round trip fewer
// per claim; and commit_after() sends the batch's last statement and COMMIT
// together. The rest behaves as pqxx::work: COMMIT throws pqxx::in_doubt_error
// when the connection is lost during it (the relay reports the batch as "may be
// published again"), and a transaction destroyed uncommitted is rolled back.
//
// REQUIRES: the first statement run in it is a claim through OutboxStore (which
// begins it), or begin_now() is called first. A libpqxx statement run before that
// would run outside the transaction, without the claim's locks; begun() lets a
// caller check.
//
// Thread safety: as the connection's: one thread at a time. Not copyable.
class BatchTransaction : public pqxx::dbtransaction {
 public:
  explicit BatchTransaction(pqxx::connection_base& conn);
  ~BatchTransaction() override;
  BatchTransaction(const BatchTransaction&) = delete;
  BatchTransaction& operator=(const BatchTransaction&) = delete;

  // Whether the server-side transaction has begun.
  bool begun() const { return begun_; }
  // Records that a statement sent BEGIN ahead of itself (PgBinaryQuery::BeginFirst).
  void mark_begun() { begun_ = true; }
  // Sends BEGIN on its own, if it has not been sent.
  void begin_now();
  // Runs the prepared statement `name` (text parameters) and COMMIT in one round
  // trip (PgBinaryQuery::exec_then_commit), and commits this transaction; returns the
  // rows the statement affected. Throws as exec_then_commit: pqxx::sql_error leaves
  // the transaction to be rolled back, pqxx::in_doubt_error means it may or may not
  // have committed. REQUIRES: begun(); `name` prepared with PgBinaryQuery::prepare.
  std::size_t commit_after(const std::string& name, const std::vector<std::string>& params);

 protected:
  void do_begin() override {}  // deferred to the first statement
  void do_commit() override;
  void do_abort() override;

 private:
  bool begun_ = false;
  bool committed_ = false;  // by commit_after(): libpqxx's commit() only records it
};

}  // namespace relay
