// The PostgreSQL ceiling: the relay's claim and mark statements with no broker.
#include <chrono>
#include <pqxx/pqxx>

#include "measurements.h"
#include "outbox/pg_array.h"
#include "publish/outbox_store.h"

namespace bench {

double measure_pg_ceiling(BenchEnv& env, long rows, int batch, int bytes, PgSettle settle) {
  env.fill(rows, bytes);
  relay::PostgresConfig config;
  config.dsn = env.pg_dsn();
  config.schema = env.schema();
  relay::OutboxStore store(config);
  store.connect();
  const std::string remove = "DELETE FROM \"" + env.schema() + "\".outbox WHERE id = ANY($1::bigint[])";
  long claimed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    pqxx::work tx(store.connection());
    auto batch_rows = store.claim(tx, batch);
    if (batch_rows.empty()) break;
    std::vector<std::int64_t> ids;
    ids.reserve(batch_rows.size());
    for (const auto& r : batch_rows) ids.push_back(r.id);
    if (settle == PgSettle::kMark)
      store.mark_published(tx, ids);
    else
      tx.exec_params0(remove, outbox::pg::bigint_array(ids));
    tx.commit();
    claimed += static_cast<long>(ids.size());
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (claimed != rows || env.pending_rows() != 0)
    throw BenchError("PG ceiling: claimed " + std::to_string(claimed) + " of " + std::to_string(rows) + " rows");
  env.reset();
  return static_cast<double>(claimed) / elapsed;
}

}  // namespace bench
