#pragma once
// BatchTransaction: the claim transaction of one batch, whose BEGIN travels with its
// first statement.

#include <cstddef>
#include <string>

#include "pg/pg_session.h"

namespace relay {

// Why: each round trip to PostgreSQL costs both processes a wake-up and a few
// system calls, which on 2-core machines is most of a small batch's PostgreSQL CPU.
// BEGIN is not sent when the transaction is constructed but in one pipeline with
// the claim (begin_with()), and commit_after() sends the batch's last statement and
// COMMIT together.
//
// Contract, as libpqxx's pqxx::work: commit() throws PgError kInDoubt when the
// session is lost during COMMIT (the relay reports the batch as "may be published
// again"); a transaction destroyed without commit() is rolled back (its row locks
// released); a statement that fails aborts it (PgError kStatement), and it can then
// only be rolled back.
//
// REQUIRES: statements of the transaction run through it (begin_with, exec,
// commit_after) or after begin_now(); a statement run on session() before the
// transaction has begun runs outside it, without the claim's locks (begun() lets a
// caller check).
//
// Thread safety: as the session's: one thread at a time. Not copyable. The session
// outlives the transaction.
class BatchTransaction {
 public:
  explicit BatchTransaction(PgSession& session);
  ~BatchTransaction();
  BatchTransaction(const BatchTransaction&) = delete;
  BatchTransaction& operator=(const BatchTransaction&) = delete;

  PgSession& session() { return session_; }
  // Whether BEGIN has been sent (it may have failed: the transaction is then ended
  // by a rollback like any other).
  bool begun() const { return begun_; }
  // Sends BEGIN on its own, if it has not been sent.
  void begin_now();
  // Runs the prepared statement `name` (binary results) in the transaction: when it
  // has not begun, BEGIN travels with it (PgSession::begin_then).
  PgResult begin_with(const std::string& name, const PgSession::Params& params);
  // Runs `sql` in the transaction (beginning it first if needed).
  PgResult exec(const std::string& sql, const PgSession::Params& params = {},
                PgSession::Format format = PgSession::Format::kBinary);
  PgResult exec_prepared(const std::string& name, const PgSession::Params& params,
                         PgSession::Format format = PgSession::Format::kBinary);
  // Commits (nothing to do if it never began). Throws PgError kInDoubt when the
  // answer to COMMIT never came, kStatement when the server rolled it back.
  void commit();
  // Runs the prepared statement `name` (text parameters) and COMMIT in one round trip
  // and ends the transaction; returns the rows the statement affected. Throws as
  // PgSession::exec_then_commit. REQUIRES: begun().
  std::size_t commit_after(const std::string& name, const PgSession::Params& params);
  // Rolls back now (errors ignored: a lost session has rolled back by itself).
  void abort();

 private:
  PgSession& session_;
  bool begun_ = false;
  bool ended_ = false;
  void require_open() const;
};

}  // namespace relay
