#include "pg/batch_transaction.h"

#include "pg/pg_error.h"

namespace relay {

BatchTransaction::BatchTransaction(PgSession& session) : session_(session) {}

BatchTransaction::~BatchTransaction() { abort(); }

void BatchTransaction::require_open() const {
  if (ended_) throw PgError(PgError::Kind::kUsage, "statement on a batch transaction that has ended");
}

void BatchTransaction::begin_now() {
  require_open();
  if (begun_) return;
  begun_ = true;  // even if BEGIN fails: whatever it opened is rolled back
  session_.exec("BEGIN");
}

PgResult BatchTransaction::begin_with(const std::string& name, const PgSession::Params& params) {
  require_open();
  if (begun_) return session_.exec_prepared(name, params);
  begun_ = true;  // even if the pipeline fails: whatever BEGIN opened is rolled back
  return session_.begin_then(name, params);
}

PgResult BatchTransaction::exec(const std::string& sql, const PgSession::Params& params, PgSession::Format format) {
  begin_now();
  return session_.exec(sql, params, format);
}

PgResult BatchTransaction::exec_prepared(const std::string& name, const PgSession::Params& params,
                                         PgSession::Format format) {
  begin_now();
  return session_.exec_prepared(name, params, format);
}

// As libpqxx's own transactions: a COMMIT whose answer never came may or may not
// have committed.
void BatchTransaction::commit() {
  require_open();
  ended_ = true;
  if (!begun_) return;  // nothing ran in a transaction
  PgResult res;
  try {
    res = session_.exec("COMMIT", {}, PgSession::Format::kText);
  } catch (const PgError& e) {
    if (e.kind() != PgError::Kind::kSessionLost) throw;
    throw PgError(PgError::Kind::kInDoubt, std::string("connection lost during COMMIT: ") + e.what());
  }
  // COMMIT of a transaction an earlier statement aborted answers ROLLBACK, not an error.
  if (res.command_tag() == "ROLLBACK")
    throw PgError(PgError::Kind::kStatement, "COMMIT rolled the transaction back: an earlier statement in it failed",
                  "", true);
}

std::size_t BatchTransaction::commit_after(const std::string& name, const PgSession::Params& params) {
  require_open();
  if (!begun_) throw PgError(PgError::Kind::kUsage, "commit_after() on a batch transaction that has not begun");
  // On an error the transaction may still be open (aborted): abort() rolls it back.
  const std::size_t affected = session_.exec_then_commit(name, params);
  ended_ = true;
  return affected;
}

void BatchTransaction::abort() {
  if (ended_) return;
  ended_ = true;
  if (!begun_ || !session_.is_open()) return;
  try {
    session_.exec("ROLLBACK", {}, PgSession::Format::kText);
  } catch (const std::exception&) {
    // A session that cannot roll back is broken; the server rolls back when it goes.
  }
}

}  // namespace relay
