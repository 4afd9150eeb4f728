// BatchTransaction: a batch's claim transaction whose BEGIN travels with its first
// claim, and whose COMMIT travels with its mark (one round trip each). The claimed
// rows are locked until the batch commits, a claim or a mark that fails leaves
// nothing behind, and a COMMIT over a lost session is in doubt, as with libpqxx's own
// transactions.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "outbox_store_fixture.h"
#include "pg/batch_transaction.h"
#include "pg/outbox_store.h"
#include "pg_error_kind.h"
#include "test_env.h"

using relay::BatchTransaction;
using relay::ClaimedRow;
using relay::OutboxStore;
using relay::PgSession;

using testenv::store_for;
using testenv::write_rows;

namespace {

std::vector<const ClaimedRow*> all_of(const std::vector<ClaimedRow>& rows) {
  std::vector<const ClaimedRow*> out;
  for (const auto& r : rows) out.push_back(&r);
  return out;
}

// The session's transaction state as the server sees it (pg_stat_activity).
std::string server_state(PgSession& session) {
  return testenv::sql_value("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(session.backend_pid()));
}

std::string count_where(const std::string& schema, const std::string& condition) {
  return testenv::sql_value("SELECT count(*) FROM \"" + schema + "\".outbox WHERE " + condition);
}

}  // namespace

TEST_CASE("a batch transaction begins with its claim: the rows stay locked until it commits what it marked") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 10);
  auto store = store_for(schema.name());
  auto other = store_for(schema.name());
  BatchTransaction tx(store->session());
  CHECK_FALSE(tx.begun());
  const auto rows = store->claim(tx, 4);
  REQUIRE(rows.size() == 4);
  CHECK(tx.begun());
  // Inside a transaction on the server, so the locks hold: another session's claim
  // skips the four rows (outside one, they would have been released at once).
  CHECK(server_state(store->session()) == "idle in transaction");
  {
    BatchTransaction peek(other->session());
    const auto rest = other->claim(peek, 10);
    REQUIRE(rest.size() == 6);
    CHECK(rest.front().id == rows.back().id + 1);
  }
  store->mark_published(tx, all_of(rows));
  tx.commit();
  CHECK(server_state(store->session()) == "idle");
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL") ==
        "4");
}

TEST_CASE("a batch transaction whose claim fails is rolled back and the session claims again") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 3);
  auto store = store_for(schema.name());
  store->session().prepare("divide", "SELECT 1 / $1::int");
  {
    BatchTransaction tx(store->session());
    try {
      tx.begin_with("divide", {"0"});
      FAIL("no error");
    } catch (const relay::PgError& e) {
      CHECK(e.sqlstate() == "22012");  // division_by_zero: the statement's own error, classified as any other
    }
    CHECK(tx.begun());
    CHECK(server_state(store->session()) == "idle in transaction (aborted)");
  }  // destroyed uncommitted: rolled back
  CHECK(server_state(store->session()) == "idle");
  BatchTransaction again(store->session());
  CHECK(store->claim(again, 10).size() == 3);
  again.commit();
}

TEST_CASE("a batch transaction that never began commits and ends quietly, and begin_now() begins it once") {
  testenv::ScopedSchema schema("batchtx");
  auto store = store_for(schema.name());
  {
    BatchTransaction tx(store->session());
    CHECK_NOTHROW(tx.commit());
  }
  {
    BatchTransaction tx(store->session());  // destroyed without a statement
  }
  CHECK(server_state(store->session()) == "idle");
  // begin_now() for statements that are not claims: a real transaction, once.
  BatchTransaction tx(store->session());
  tx.begin_now();
  tx.begin_now();
  CHECK(tx.begun());
  CHECK(server_state(store->session()) == "idle in transaction");
  tx.commit();
  CHECK(server_state(store->session()) == "idle");
}

TEST_CASE("a COMMIT whose session is lost is in doubt") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 2);
  auto store = store_for(schema.name());
  BatchTransaction tx(store->session());
  const auto rows = store->claim(tx, 2);
  REQUIRE(rows.size() == 2);
  store->mark_published(tx, all_of(rows));
  testenv::sql_exec("SELECT pg_terminate_backend(" + std::to_string(store->session().backend_pid()) + ")");
  CHECK(relaytest::pg_error_kind([&] { tx.commit(); }) == relay::PgError::Kind::kInDoubt);
  // (Here it did not commit: the server ended the session first.)
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "2");
}

TEST_CASE("the mark and the COMMIT go out together: the rows are published, or deleted, and the session is idle") {
  for (bool delete_on_publish : {false, true}) {
    INFO("delete_on_publish " << delete_on_publish);
    testenv::ScopedSchema schema("batchtx");
    write_rows(schema.name(), 6);
    auto store = store_for(schema.name(), delete_on_publish);
    BatchTransaction tx(store->session());
    const auto rows = store->claim(tx, 4);
    REQUIRE(rows.size() == 4);
    store->mark_published_and_commit(tx, all_of(rows));
    CHECK(server_state(store->session()) == "idle");
    CHECK(count_where(schema.name(), "published_at IS NULL") == "2");
    CHECK(count_where(schema.name(), "true") == (delete_on_publish ? "2" : "6"));
    // The session goes on: the next batch claims the other two.
    BatchTransaction next(store->session());
    CHECK(store->claim(next, 10).size() == 2);
    next.commit();
  }
}

TEST_CASE("a row its own transaction moved since the claim is still marked, after the commit") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 3);
  auto store = store_for(schema.name());
  BatchTransaction tx(store->session());
  const auto rows = store->claim(tx, 3);
  REQUIRE(rows.size() == 3);
  tx.exec("UPDATE \"" + schema.name() + "\".outbox SET attempts = attempts WHERE id = 2");  // a new version
  store->mark_published_and_commit(tx, all_of(rows));
  CHECK(count_where(schema.name(), "published_at IS NOT NULL") == "3");
}

TEST_CASE("a mark that fails sends no COMMIT: the batch is rolled back and its rows stay pending") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 3);
  const std::string s = "\"" + schema.name() + "\"";
  testenv::sql_exec("CREATE FUNCTION " + s +
                    ".refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'P0001'; END$$");
  testenv::sql_exec("CREATE TRIGGER refuse BEFORE UPDATE ON " + s +
                    ".outbox FOR EACH ROW WHEN (new.id = 2) "
                    "EXECUTE FUNCTION " +
                    s + ".refuse()");
  auto store = store_for(schema.name());
  {
    BatchTransaction tx(store->session());
    const auto rows = store->claim(tx, 3);
    REQUIRE(rows.size() == 3);
    try {
      store->mark_published_and_commit(tx, all_of(rows));
      FAIL("no error");
    } catch (const relay::PgError& e) {
      CHECK(e.sqlstate() == "P0001");
    }
    CHECK(server_state(store->session()) == "idle in transaction (aborted)");
  }
  CHECK(server_state(store->session()) == "idle");
  CHECK(count_where(schema.name(), "published_at IS NULL") == "3");
}

TEST_CASE("a session lost before the mark's COMMIT went out is a broken connection; after, the COMMIT is in doubt") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 4);
  auto terminate = [](PgSession& session) {
    testenv::sql_exec("SELECT pg_terminate_backend(" + std::to_string(session.backend_pid()) + ")");
  };
  SUBCASE("lost before: the session's first mark is prepared first, and that fails") {
    auto store = store_for(schema.name());
    BatchTransaction tx(store->session());
    const auto rows = store->claim(tx, 2);
    REQUIRE(rows.size() == 2);
    terminate(store->session());
    CHECK(relaytest::pg_error_kind([&] { store->mark_published_and_commit(tx, all_of(rows)); }) ==
          relay::PgError::Kind::kSessionLost);
    CHECK(count_where(schema.name(), "published_at IS NULL") == "4");
  }
  SUBCASE("lost after: the statement is prepared, the mark and COMMIT go out, no answer comes") {
    auto store = store_for(schema.name());
    {
      BatchTransaction first(store->session());
      const auto rows = store->claim(first, 2);
      store->mark_published_and_commit(first, all_of(rows));  // prepares the mark on this session
    }
    BatchTransaction tx(store->session());
    const auto rows = store->claim(tx, 2);
    REQUIRE(rows.size() == 2);
    terminate(store->session());
    CHECK(relaytest::pg_error_kind([&] { store->mark_published_and_commit(tx, all_of(rows)); }) ==
          relay::PgError::Kind::kInDoubt);
    // (Here the server had ended the session first: the second batch was not marked.)
    CHECK(count_where(schema.name(), "published_at IS NULL") == "2");
  }
}

TEST_CASE("a COMMIT after a statement failed does not pretend to commit: the server rolled back, and says so") {
  testenv::ScopedSchema schema("batchtx");
  write_rows(schema.name(), 2);
  auto store = store_for(schema.name());
  BatchTransaction tx(store->session());
  REQUIRE(store->claim(tx, 2).size() == 2);
  CHECK(relaytest::pg_error_kind([&] { tx.exec("SELECT 1 / 0"); }) == relay::PgError::Kind::kStatement);
  // libpq answers such a COMMIT with the tag ROLLBACK, not an error: the batch must not
  // be counted as marked.
  CHECK(relaytest::pg_error_kind([&] { tx.commit(); }) == relay::PgError::Kind::kStatement);
  CHECK(server_state(store->session()) == "idle");
  CHECK(count_where(schema.name(), "published_at IS NULL") == "2");
}
