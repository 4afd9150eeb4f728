// The per_key claim against a real PostgreSQL: one head per key, the walk over the
// keys going on from a cursor and wrapping, heads held by another batch holding
// their keys back, and heads found behind a long run of blocked keys.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "pg/outbox_store.h"
#include "pg_error_kind.h"
#include "test_env.h"

using relay::ClaimedRow;
using relay::KeyCursor;
using relay::OutboxStore;

namespace {

// One lane, so every key is this relay's.
const std::vector<int> kAllLanes = {0};

std::unique_ptr<OutboxStore> per_key_store(const std::string& schema, bool park_key = true,
                                           int statement_timeout_ms = 30000) {
  relay::PostgresConfig config;
  config.dsn = testenv::pg_dsn();
  config.schema = schema;
  config.statement_timeout_ms = statement_timeout_ms;
  relay::StoreOptions options;
  options.key_lanes = 1;
  options.park_key = park_key;
  auto store = std::make_unique<OutboxStore>(config, options);
  store->connect();
  return store;
}

// `events` rows for each of `keys` keys k0, k1, ..., written round-robin, so the ids
// of one key interleave with the others'.
void write_rows(const std::string& schema, int keys, int events) {
  testenv::sql_exec("INSERT INTO \"" + schema +
                    "\".outbox (message_id, exchange, routing_key, message_type, "
                    "ordering_key, payload) SELECT gen_random_uuid(), 'x', 'rk', 'T', 'k' || (g % " +
                    std::to_string(keys) + "), convert_to(g::text, 'UTF8') FROM generate_series(0, " +
                    std::to_string(keys * events - 1) + ") g ORDER BY g");
}

// The lowest pending id of a key: its head.
std::string head_of(const std::string& schema, const std::string& key) {
  return testenv::sql_value("SELECT min(id) FROM \"" + schema +
                            "\".outbox WHERE published_at IS NULL AND "
                            "ordering_key = '" +
                            key + "'");
}

std::vector<std::string> keys_of(const std::vector<ClaimedRow>& rows) {
  std::vector<std::string> keys;
  for (const auto& r : rows) keys.push_back(r.ordering_key);
  return keys;
}

// Claims, checks every row is its key's head, marks them published and commits.
std::vector<std::string> claim_and_publish(OutboxStore& store, const std::string& schema, int limit,
                                           KeyCursor& cursor) {
  relay::BatchTransaction tx(store.session());
  auto rows = store.claim_key_heads(tx, limit, kAllLanes, cursor);
  std::vector<const ClaimedRow*> claimed;
  for (const auto& r : rows) {
    CHECK(std::to_string(r.id) == head_of(schema, r.ordering_key));
    claimed.push_back(&r);
  }
  store.mark_published(tx, claimed);
  tx.commit();
  return keys_of(rows);
}

using Keys = std::vector<std::string>;

}  // namespace

TEST_CASE("a per_key claim takes one head per key in key order, goes on after the last key, and wraps") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 6, 3);
  auto store = per_key_store(schema.name());
  KeyCursor cursor;
  CHECK(claim_and_publish(*store, schema.name(), 4, cursor) == Keys{"k0", "k1", "k2", "k3"});
  CHECK(cursor.after == "k3");
  CHECK(claim_and_publish(*store, schema.name(), 4, cursor) == Keys{"k4", "k5"});
  // Past the last key: from the first again, now at each key's second event.
  CHECK(claim_and_publish(*store, schema.name(), 4, cursor) == Keys{"k0", "k1", "k2", "k3"});
  CHECK(claim_and_publish(*store, schema.name(), 4, cursor) == Keys{"k4", "k5"});
  CHECK(claim_and_publish(*store, schema.name(), 100, cursor).size() == 6);  // the third events
  CHECK(claim_and_publish(*store, schema.name(), 100, cursor).empty());
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "0");
}

TEST_CASE("a head another batch holds keeps its whole key back; the other keys flow") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 4, 3);
  auto first = per_key_store(schema.name());
  auto second = per_key_store(schema.name());
  KeyCursor first_cursor, second_cursor;
  relay::BatchTransaction held(first->session());
  auto in_flight = first->claim_key_heads(held, 1, kAllLanes, first_cursor);
  REQUIRE(keys_of(in_flight) == Keys{"k0"});

  relay::BatchTransaction tx(second->session());
  auto rows = second->claim_key_heads(tx, 100, kAllLanes, second_cursor);
  CHECK(keys_of(rows) == Keys{"k1", "k2", "k3"});  // nothing of k0: its head is in flight
  tx.commit();
  held.commit();
}

TEST_CASE("heads behind a long run of keys in backoff are reached in the same claim") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 20, 2);
  // Every key but the last waits an hour: with limit 1 a walk covers two keys, so
  // the claim has to walk on several times before it finds k9 (k10..k19 sort first).
  testenv::sql_exec("UPDATE \"" + schema.name() +
                    "\".outbox SET next_attempt_at = now() + interval '1 hour' "
                    "WHERE ordering_key <> 'k9'");
  auto store = per_key_store(schema.name());
  KeyCursor cursor;
  CHECK(claim_and_publish(*store, schema.name(), 1, cursor) == Keys{"k9"});
  CHECK(claim_and_publish(*store, schema.name(), 1, cursor) == Keys{"k9"});  // its second event
  CHECK(claim_and_publish(*store, schema.name(), 1, cursor).empty());
}

TEST_CASE("park_key: a parked head blocks its key; park_message: the key's next rows are its heads") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 3, 4);
  // k1's first two rows are parked.
  testenv::sql_exec("UPDATE \"" + schema.name() +
                    "\".outbox SET parked_at = now(), attempts = 3, "
                    "last_error = 'x' WHERE id IN (SELECT id FROM \"" +
                    schema.name() + "\".outbox WHERE ordering_key = 'k1' ORDER BY id LIMIT 2)");
  const std::string third_of_k1 = testenv::sql_value(
      "SELECT id FROM \"" + schema.name() + "\".outbox WHERE ordering_key = 'k1' ORDER BY id OFFSET 2 LIMIT 1");
  SUBCASE("park_key") {
    auto store = per_key_store(schema.name(), true);
    KeyCursor cursor;
    relay::BatchTransaction tx(store->session());
    CHECK(keys_of(store->claim_key_heads(tx, 100, kAllLanes, cursor)) == Keys{"k0", "k2"});
  }
  SUBCASE("park_message") {
    auto store = per_key_store(schema.name(), false);
    KeyCursor cursor;
    relay::BatchTransaction tx(store->session());
    auto rows = store->claim_key_heads(tx, 100, kAllLanes, cursor);
    REQUIRE(keys_of(rows) == Keys{"k0", "k1", "k2"});
    CHECK(std::to_string(rows[1].id) == third_of_k1);  // past both parked rows, and only one head
  }
}

TEST_CASE(
    "park_message: a walk with the table's statistics unknown stays on the key index (no sort of all pending rows)") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 50, 120);  // 6,000 pending rows, never analyzed
  auto store = per_key_store(schema.name(), false);
  relay::BatchTransaction tx(store->session());
  KeyCursor cursor;
  CHECK(store->claim_key_heads(tx, 10, kAllLanes, cursor).size() == 10);  // prepared on first use
  const auto plan = tx.exec("EXPLAIN EXECUTE outbox_key_heads_start(400, 100, '{0}')");
  std::string text;
  for (int r = 0; r < plan.rows(); ++r) text += std::string(plan.bytes(r, 0)) + "\n";
  CHECK_MESSAGE(text.find("outbox_pending_key_idx") != std::string::npos, text);
  CHECK_MESSAGE(text.find("Bitmap") == std::string::npos, text);
}

// The claims are prepared on a session's first use of each. A claim that times out
// behind a migration's lock while its statement is being prepared must not leave the
// session unable to claim (a statement never prepared, or prepared twice: 42P05).
TEST_CASE("a claim that timed out behind a table lock claims again on the same session once the lock is gone") {
  testenv::ScopedSchema schema("keyheads");
  write_rows(schema.name(), 3, 2);
  auto store = per_key_store(schema.name(), true, /*statement_timeout_ms=*/300);
  {
    relay::BatchTransaction tx(store->session());
    CHECK(store->claim(tx, 1).size() == 1);  // the unordered claim: prepared and run
  }
  pqxx::connection locker(testenv::pg_dsn());
  {
    pqxx::work lock(locker);
    lock.exec("LOCK TABLE \"" + schema.name() + "\".outbox IN ACCESS EXCLUSIVE MODE");
    relay::BatchTransaction tx(store->session());
    KeyCursor cursor;
    CHECK(relaytest::pg_error_kind([&] { store->claim_key_heads(tx, 10, kAllLanes, cursor); }) ==
          relay::PgError::Kind::kStatement);  // 57014
  }                                           // both roll back: the lock is gone
  KeyCursor cursor;
  CHECK(claim_and_publish(*store, schema.name(), 10, cursor) == Keys{"k0", "k1", "k2"});
  relay::BatchTransaction tx(store->session());
  CHECK(store->claim(tx, 10).size() == 3);  // the second events, by the unordered claim
}
