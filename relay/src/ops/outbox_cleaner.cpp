#include "ops/outbox_cleaner.h"

#include "outbox/sql_identifier.h"

namespace relay {

OutboxCleaner::OutboxCleaner(PgSession& session, const std::string& schema)
    : session_(session), schema_(schema), table_(outbox::quoted_identifier(schema, "schema") + ".outbox") {}

// One bigint key per schema; LaneManager's locks use the two-int4 key space, so
// they can never collide with this one.
bool OutboxCleaner::try_lock() {
  return session_.exec("SELECT pg_try_advisory_lock(hashtextextended('outbox-retention:' || $1, 0))", {schema_})
      .boolean(0, 0);
}

void OutboxCleaner::unlock() {
  session_.exec("SELECT pg_advisory_unlock(hashtextextended('outbox-retention:' || $1, 0))", {schema_});
}

std::string OutboxCleaner::cutoff_for(std::chrono::seconds age) {
  return std::string(
      session_.exec("SELECT (now() - $1 * interval '1 second')::text", {std::to_string(age.count())}).bytes(0, 0));
}

std::int64_t OutboxCleaner::count_older(const std::string& cutoff) {
  return session_.exec("SELECT count(*) FROM " + table_ + " WHERE published_at < $1::timestamptz", {cutoff}).int8(0, 0);
}

OutboxCleaner::Window OutboxCleaner::delete_window(const std::string& cutoff, std::int64_t after_id, int batch) {
  // The DELETE repeats the published_at test: if a replay made a row pending after
  // the window was read, the re-check on the locked row keeps it.
  const std::string sql = "WITH win AS (SELECT id, published_at, created_at FROM " + table_ +
                          " WHERE id > $2 ORDER BY id LIMIT $3), "
                          "gone AS (DELETE FROM " +
                          table_ +
                          " o USING win WHERE o.id = win.id "
                          "AND win.published_at < $1::timestamptz AND o.published_at < $1::timestamptz RETURNING 1) "
                          "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM win), "
                          "coalesce((SELECT max(id) FROM win), $2), "
                          "coalesce((SELECT bool_and(created_at >= $1::timestamptz) FROM win), false)";
  // One statement, its own transaction (autocommit).
  const auto r = session_.exec(sql, {cutoff, std::to_string(after_id), std::to_string(batch)});
  return Window{r.int8(0, 0), r.int8(0, 1), r.int8(0, 2), r.boolean(0, 3)};
}

}  // namespace relay
