#include "ops/outbox_cleaner.h"

#include <pqxx/pqxx>

#include "outbox/sql_identifier.h"

namespace relay {

OutboxCleaner::OutboxCleaner(pqxx::connection_base& conn, const std::string& schema)
    : conn_(conn), schema_(schema), table_(outbox::quoted_identifier(schema, "schema") + ".outbox") {}

// One bigint key per schema; LaneManager's locks use the two-int4 key space, so
// they can never collide with this one.
bool OutboxCleaner::try_lock() {
  pqxx::nontransaction tx(conn_);
  return tx.exec_params1("SELECT pg_try_advisory_lock(hashtextextended('outbox-retention:' || $1, 0))",
                         schema_)[0].as<bool>();
}

void OutboxCleaner::unlock() {
  pqxx::nontransaction tx(conn_);
  tx.exec_params("SELECT pg_advisory_unlock(hashtextextended('outbox-retention:' || $1, 0))", schema_);
}

std::string OutboxCleaner::cutoff_for(std::chrono::seconds age) {
  pqxx::nontransaction tx(conn_);
  return tx.exec_params1("SELECT (now() - $1 * interval '1 second')::text",
                         static_cast<long long>(age.count()))[0].c_str();
}

std::int64_t OutboxCleaner::count_older(const std::string& cutoff) {
  pqxx::read_transaction tx(conn_);
  return tx.exec_params1("SELECT count(*) FROM " + table_ + " WHERE published_at < $1::timestamptz",
                         cutoff)[0].as<std::int64_t>();
}

OutboxCleaner::Window OutboxCleaner::delete_window(const std::string& cutoff, std::int64_t after_id,
                                                   int batch) {
  // The DELETE repeats the published_at test: if a replay made a row pending after
  // the window was read, the re-check on the locked row keeps it.
  const std::string sql =
      "WITH win AS (SELECT id, published_at, created_at FROM " + table_ +
      " WHERE id > $2 ORDER BY id LIMIT $3), "
      "gone AS (DELETE FROM " + table_ + " o USING win WHERE o.id = win.id "
      "AND win.published_at < $1::timestamptz AND o.published_at < $1::timestamptz RETURNING 1) "
      "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM win), "
      "coalesce((SELECT max(id) FROM win), $2), "
      "coalesce((SELECT bool_and(created_at >= $1::timestamptz) FROM win), false)";
  pqxx::work tx(conn_);
  auto r = tx.exec_params1(sql, cutoff, after_id, batch);
  tx.commit();
  return Window{r[0].as<std::int64_t>(), r[1].as<std::int64_t>(), r[2].as<std::int64_t>(), r[3].as<bool>()};
}

}  // namespace relay
