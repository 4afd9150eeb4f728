// OutboxStore::mark_published against a real PostgreSQL: claimed rows are found by
// the address of their claimed version (ctid, no index probe), exactly those rows
// are marked (or deleted), and a row the claim's own transaction changed since is
// still marked, by id.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "publish/outbox_store.h"
#include "test_env.h"

using relay::ClaimedRow;
using relay::OutboxStore;

namespace {

std::unique_ptr<OutboxStore> store_for(const std::string& schema, bool delete_on_publish) {
  relay::PostgresConfig config;
  config.dsn = testenv::pg_dsn();
  config.schema = schema;
  auto store = std::make_unique<OutboxStore>(config);
  store->delete_on_publish(delete_on_publish);
  store->connect();
  return store;
}

void write_rows(const std::string& schema, int n) {
  testenv::sql_exec("INSERT INTO \"" + schema + "\".outbox (message_id, exchange, routing_key, message_type, payload) "
                    "SELECT gen_random_uuid(), 'x', 'rk', 'T', convert_to(g::text, 'UTF8') "
                    "FROM generate_series(1, " + std::to_string(n) + ") g");
}

// Scans of any of the outbox's indexes so far in `tx` (counted per transaction).
long index_scans(pqxx::transaction_base& tx, const std::string& schema) {
  return tx.exec1("SELECT sum(pg_stat_get_xact_numscans(indexrelid)) FROM pg_index WHERE indrelid = " +
                  tx.quote("\"" + schema + "\".outbox") + "::regclass")[0].as<long>();
}

// "id:state" of every row, in id order: pending, published or (absent) deleted.
std::string states(const std::string& schema, int n) {
  return testenv::sql_value("SELECT string_agg(g || ':' || CASE WHEN o.id IS NULL THEN 'deleted' "
                            "WHEN o.published_at IS NULL THEN 'pending' ELSE 'published' END, ' ' ORDER BY g) "
                            "FROM generate_series(1, " + std::to_string(n) + ") g "
                            "LEFT JOIN \"" + schema + "\".outbox o ON o.id = g");
}

}  // namespace

TEST_CASE("the mark finds the claimed rows by address, without an index probe, and marks exactly them") {
  for (const bool delete_mode : {false, true}) {
    CAPTURE(delete_mode);
    testenv::ScopedSchema schema("mark");
    write_rows(schema.name(), 5);
    auto store = store_for(schema.name(), delete_mode);
    pqxx::work tx(store->connection());
    const auto rows = store->claim(tx, 3);
    REQUIRE(rows.size() == 3);
    for (const auto& r : rows) CHECK(r.ctid.front() == '(');
    const long scans = index_scans(tx, schema.name());
    store->mark_published(tx, {&rows[0], &rows[2]});  // row 2 claimed, not acked: stays pending
    CHECK(index_scans(tx, schema.name()) == scans);
    tx.commit();
    const std::string done = delete_mode ? "deleted" : "published";
    CHECK(states(schema.name(), 5) == "1:" + done + " 2:pending 3:" + done + " 4:pending 5:pending");
  }
}

TEST_CASE("a claimed row its own transaction changed since the claim is still marked, by id") {
  for (const bool delete_mode : {false, true}) {
    CAPTURE(delete_mode);
    testenv::ScopedSchema schema("mark");
    write_rows(schema.name(), 4);
    auto store = store_for(schema.name(), delete_mode);
    pqxx::work tx(store->connection());
    const auto rows = store->claim(tx, 3);
    REQUIRE(rows.size() == 3);
    // A new version of row 2 at another address, written by the claim's transaction.
    tx.exec0("UPDATE \"" + schema.name() + "\".outbox SET last_error = 'seen' WHERE id = 2");
    CHECK(tx.exec1("SELECT ctid::text FROM \"" + schema.name() + "\".outbox WHERE id = 2")[0].as<std::string>() !=
          rows[1].ctid);
    const long scans = index_scans(tx, schema.name());
    store->mark_published(tx, {&rows[0], &rows[1], &rows[2]});
    CHECK(index_scans(tx, schema.name()) > scans);  // the fallback by id ran
    tx.commit();
    const std::string done = delete_mode ? "deleted" : "published";
    CHECK(states(schema.name(), 4) == "1:" + done + " 2:" + done + " 3:" + done + " 4:pending");
  }
}
