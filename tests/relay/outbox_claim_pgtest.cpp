// OutboxStore::claim_around against a real PostgreSQL: a claim made behind a batch in
// flight leaves out that batch's id range instead of visiting each of its locked rows,
// still claims what is due below the range first, and takes the rest above it.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "publish/outbox_store.h"
#include "test_env.h"

using relay::ClaimedRow;
using relay::OutboxStore;

namespace {

std::unique_ptr<OutboxStore> connected_store(const std::string& schema) {
  relay::PostgresConfig config;
  config.dsn = testenv::pg_dsn();
  config.schema = schema;
  auto store = std::make_unique<OutboxStore>(config);
  store->connect();
  return store;
}

void write_rows(const std::string& schema, int n) {
  testenv::sql_exec("INSERT INTO \"" + schema + "\".outbox (message_id, exchange, routing_key, message_type, payload) "
                    "SELECT gen_random_uuid(), 'x', 'rk', 'T', convert_to(g::text, 'UTF8') "
                    "FROM generate_series(1, " + std::to_string(n) + ") g");
}

std::vector<std::int64_t> ids_of(const std::vector<ClaimedRow>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& r : rows) ids.push_back(r.id);
  return ids;
}

// Heap tuples fetched through the outbox's indexes so far in `tx` (PostgreSQL counts
// them per index and per transaction).
long tuples_fetched(pqxx::transaction_base& tx, const std::string& schema) {
  return tx.exec1("SELECT sum(pg_stat_get_xact_tuples_fetched(indexrelid)) FROM pg_index WHERE indrelid = " +
                  tx.quote("\"" + schema + "\".outbox") + "::regclass")[0].as<long>();
}

}  // namespace

TEST_CASE("a claim around a batch in flight takes due rows below its range, then above, without visiting it") {
  testenv::ScopedSchema schema("claim");
  write_rows(schema.name(), 400);
  // Row 3 is in backoff: not due, so not claimed from below either.
  testenv::sql_exec("UPDATE \"" + schema.name() + "\".outbox SET next_attempt_at = now() + interval '1 hour' "
                    "WHERE id = 3");
  auto inflight = connected_store(schema.name());
  auto next = connected_store(schema.name());
  // The batch in flight: rows 5..304 (its claim skipped rows 1, 2 and 4 as if
  // another relay held them then; here they are simply left out).
  pqxx::work held(inflight->connection());
  held.exec("SELECT id FROM \"" + schema.name() + "\".outbox WHERE id BETWEEN 5 AND 304 FOR UPDATE");

  SUBCASE("the plain claim visits every locked row of the batch in flight") {
    pqxx::work tx(next->connection());
    const long before = tuples_fetched(tx, schema.name());
    const auto rows = next->claim(tx, 10);
    CHECK(ids_of(rows) == std::vector<std::int64_t>{1, 2, 4, 305, 306, 307, 308, 309, 310, 311});
    CHECK(tuples_fetched(tx, schema.name()) - before >= 300);
  }
  SUBCASE("the claim around it does not, and returns the same rows") {
    pqxx::work tx(next->connection());
    const long before = tuples_fetched(tx, schema.name());
    const auto rows = next->claim_around(tx, 10, 5, 304);
    CHECK(ids_of(rows) == std::vector<std::int64_t>{1, 2, 4, 305, 306, 307, 308, 309, 310, 311});
    CHECK(tuples_fetched(tx, schema.name()) - before < 30);
  }
  SUBCASE("a claim around a range stops at its limit below the range") {
    pqxx::work tx(next->connection());
    CHECK(ids_of(next->claim_around(tx, 2, 5, 304)) == std::vector<std::int64_t>{1, 2});
  }
  SUBCASE("rows inside the range that the batch does not hold are left for a later claim") {
    held.abort();  // the batch ended without marking anything: its rows are claimable again
    pqxx::work tx(next->connection());
    CHECK(ids_of(next->claim_around(tx, 3, 5, 304)) == std::vector<std::int64_t>{1, 2, 4});
    // The next claim (here on the other session, past the rows `tx` holds) reaches them.
    pqxx::work later(inflight->connection());
    CHECK(ids_of(inflight->claim(later, 3)) == std::vector<std::int64_t>{5, 6, 7});
  }
}
