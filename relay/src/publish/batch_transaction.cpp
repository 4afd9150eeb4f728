#include "publish/batch_transaction.h"

#include "publish/pg_binary_query.h"

#include <pqxx/except>
#include <string>

namespace relay {

BatchTransaction::BatchTransaction(pqxx::connection_base& conn)
    : namedclass{"BatchTransaction"}, dbtransaction(conn, "READ COMMITTED", pqxx::read_write) {
  Begin();
}

BatchTransaction::~BatchTransaction() { End(); }

void BatchTransaction::begin_now() {
  if (begun_) return;
  direct_exec("BEGIN");
  begun_ = true;
}

std::size_t BatchTransaction::commit_after(const std::string& name, const std::vector<std::string>& params) {
  if (!begun_) throw pqxx::usage_error("commit_after() on a batch transaction that has not begun");
  const std::size_t affected = PgBinaryQuery::exec_then_commit(conn(), PgBinaryQuery::Prepared{name}, params);
  committed_ = true;
  commit();
  return affected;
}

// As libpqxx's own transactions: a COMMIT whose answer never came (the statement's
// completion is unknown, or the session is gone) may or may not have committed.
void BatchTransaction::do_commit() {
  if (!begun_ || committed_) return;  // nothing ran in a transaction, or commit_after() committed it
  try {
    direct_exec("COMMIT");
  } catch (const pqxx::statement_completion_unknown& e) {
    throw pqxx::in_doubt_error(std::string("COMMIT outcome unknown: ") + e.what());
  } catch (const std::exception& e) {
    if (!conn().is_open()) throw pqxx::in_doubt_error(std::string("connection lost during COMMIT: ") + e.what());
    throw;
  }
}

void BatchTransaction::do_abort() {
  if (begun_) dbtransaction::do_abort();
}

}  // namespace relay
