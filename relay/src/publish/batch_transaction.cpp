#include "publish/batch_transaction.h"

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

// As libpqxx's own transactions: a COMMIT whose answer never came (the statement's
// completion is unknown, or the session is gone) may or may not have committed.
void BatchTransaction::do_commit() {
  if (!begun_) return;  // nothing ran in a transaction: nothing to commit
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
