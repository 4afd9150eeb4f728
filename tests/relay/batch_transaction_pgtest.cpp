// BatchTransaction: a batch's claim transaction whose BEGIN travels with its first
// claim (one round trip). The claimed rows are locked until the batch commits, a
// claim that fails leaves nothing behind, and a COMMIT over a lost session is in
// doubt, as with libpqxx's own transactions.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "publish/batch_transaction.h"
#include "publish/outbox_store.h"
#include "publish/pg_binary_query.h"
#include "test_env.h"

using relay::BatchTransaction;
using relay::ClaimedRow;
using relay::OutboxStore;
using relay::PgBinaryQuery;

namespace {

std::unique_ptr<OutboxStore> store_for(const std::string& schema) {
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

std::vector<const ClaimedRow*> all_of(const std::vector<ClaimedRow>& rows) {
  std::vector<const ClaimedRow*> out;
  for (const auto& r : rows) out.push_back(&r);
  return out;
}

// The session's transaction state as the server sees it (pg_stat_activity).
std::string server_state(pqxx::connection& conn) {
  return testenv::sql_value("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(conn.backendpid()));
}

}  // namespace

TEST_CASE("a batch transaction begins with its claim: the rows stay locked until it commits what it marked") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 10);
  auto store = store_for(schema.name());
  auto other = store_for(schema.name());
  BatchTransaction tx(store->connection());
  CHECK_FALSE(tx.begun());
  const auto rows = store->claim(tx, 4);
  REQUIRE(rows.size() == 4);
  CHECK(tx.begun());
  // Inside a transaction on the server, so the locks hold: another session's claim
  // skips the four rows (outside one, they would have been released at once).
  CHECK(server_state(store->connection()) == "idle in transaction");
  {
    pqxx::work peek(other->connection());
    const auto rest = other->claim(peek, 10);
    REQUIRE(rest.size() == 6);
    CHECK(rest.front().id == rows.back().id + 1);
  }
  store->mark_published(tx, all_of(rows));
  tx.commit();
  CHECK(server_state(store->connection()) == "idle");
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL") ==
        "4");
}

TEST_CASE("a batch transaction whose claim fails is rolled back and the session claims again") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 3);
  auto store = store_for(schema.name());
  PgBinaryQuery::prepare(store->connection(), "divide", "SELECT 1 / $1::int");
  {
    BatchTransaction tx(store->connection());
    tx.mark_begun();
    try {
      PgBinaryQuery q(store->connection(), PgBinaryQuery::Prepared{"divide"}, {"0"}, PgBinaryQuery::BeginFirst{});
      FAIL("no error");
    } catch (const pqxx::sql_error& e) {
      CHECK(e.sqlstate() == "22012");  // division_by_zero: the statement's own error, classified as any other
    }
    CHECK(server_state(store->connection()) == "idle in transaction (aborted)");
  }  // destroyed uncommitted: rolled back
  CHECK(server_state(store->connection()) == "idle");
  BatchTransaction again(store->connection());
  CHECK(store->claim(again, 10).size() == 3);
  again.commit();
}

TEST_CASE("a batch transaction that never began commits and ends quietly, and begin_now() begins it once") {
  testenv::ScopedSchema schema("batchtx");
  auto store = store_for(schema.name());
  {
    BatchTransaction tx(store->connection());
    CHECK_NOTHROW(tx.commit());
  }
  {
    BatchTransaction tx(store->connection());  // destroyed without a statement
  }
  CHECK(server_state(store->connection()) == "idle");
  // begin_now() for statements that are not claims: a real transaction, once.
  BatchTransaction tx(store->connection());
  tx.begin_now();
  tx.begin_now();
  CHECK(tx.begun());
  CHECK(server_state(store->connection()) == "idle in transaction");
  tx.commit();
  CHECK(server_state(store->connection()) == "idle");
}

TEST_CASE("a COMMIT whose session is lost is in doubt") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 2);
  auto store = store_for(schema.name());
  BatchTransaction tx(store->connection());
  const auto rows = store->claim(tx, 2);
  REQUIRE(rows.size() == 2);
  store->mark_published(tx, all_of(rows));
  testenv::sql_exec("SELECT pg_terminate_backend(" + std::to_string(store->connection().backendpid()) + ")");
  CHECK_THROWS_AS(tx.commit(), pqxx::in_doubt_error);
  // (Here it did not commit: the server ended the session first.)
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "2");
}
