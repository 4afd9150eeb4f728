// The inbox and the idempotent-write helpers against a real PostgreSQL.

#include <doctest/doctest.h>

#include <future>
#include <pqxx/pqxx>

#include "consumer_test_support.h"
#include "outbox/errors.h"
#include "outbox/inbox.h"
#include "outbox/natural_key_insert.h"
#include "outbox/pqxx_compat.h"
#include "outbox/state_transition.h"
#include "test_env.h"

namespace {

using outbox::ConsumerName;
using outbox::Inbox;
using outbox::InboxOutcome;
using outbox::MessageId;

Inbox make_inbox(const testenv::ScopedSchema& schema, const std::string& consumer) {
  return Inbox({schema.name(), ConsumerName(consumer)});
}

// True once the backend `pid` waits for a lock (another transaction's row).
bool waits_for_lock(int pid) {
  return testenv::eventually(std::chrono::seconds(5), [&] {
    return testenv::sql_value("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                              " AND wait_event_type = 'Lock'") == "1";
  });
}

}  // namespace

TEST_CASE("a message recorded twice by one consumer is new once, then a duplicate") {
  testenv::ScopedSchema schema("inbox");
  auto inbox = make_inbox(schema, "billing");
  auto id = MessageId::generate_v7();
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    CHECK(inbox.record(tx, id, "OrderPlaced") == InboxOutcome::kNew);
    tx.commit();
  }
  pqxx::work tx(conn);
  CHECK(inbox.record(tx, id, "OrderPlaced") == InboxOutcome::kDuplicate);
  // A duplicate is not an error: the transaction is still usable.
  CHECK(outbox::pgx::exec1(tx, "SELECT 1")[0].as<int>() == 1);
  CHECK(testenv::sql_value("SELECT message_type FROM " + schema.name() + ".inbox") == "OrderPlaced");
}

TEST_CASE(
    "the nil UUID is refused by the inbox rather than recorded: every later message carrying it would be a duplicate") {
  testenv::ScopedSchema schema("inbox");
  auto inbox = make_inbox(schema, "billing");
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (const char* sentinel : {"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"})
    CHECK_THROWS_WITH_AS(inbox.record(tx, MessageId::parse(sentinel)), doctest::Contains("message_id: is the UUID"),
                         outbox::ValidationError);
  CHECK(outbox::pgx::exec1(tx, "SELECT count(*) FROM " + schema.name() + ".inbox")[0].as<int>() == 0);
}

TEST_CASE("two consumers of one message each get it as new") {
  testenv::ScopedSchema schema("inbox");
  auto billing = make_inbox(schema, "billing");
  auto shipping = make_inbox(schema, "shipping");
  auto id = MessageId::generate_v7();
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  CHECK(billing.record(tx, id) == InboxOutcome::kNew);
  CHECK(shipping.record(tx, id) == InboxOutcome::kNew);
  CHECK(billing.record(tx, id) == InboxOutcome::kDuplicate);
  tx.commit();
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".inbox") == "2");
}

TEST_CASE("a rolled-back inbox record leaves the message new") {
  testenv::ScopedSchema schema("inbox");
  auto inbox = make_inbox(schema, "billing");
  auto id = MessageId::generate_v7();
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    CHECK(inbox.record(tx, id) == InboxOutcome::kNew);
    tx.abort();  // the effect failed: the message must count as not done
  }
  pqxx::work tx(conn);
  CHECK(inbox.record(tx, id) == InboxOutcome::kNew);
}

TEST_CASE("a concurrent second delivery waits for the first and is a duplicate when it commits") {
  testenv::ScopedSchema schema("inbox");
  auto inbox = make_inbox(schema, "billing");
  auto id = MessageId::generate_v7();
  pqxx::connection first_conn(testenv::pg_dsn()), second_conn(testenv::pg_dsn());
  pqxx::work first(first_conn);
  REQUIRE(inbox.record(first, id) == InboxOutcome::kNew);

  auto second = std::async(std::launch::async, [&] {
    pqxx::work tx(second_conn);
    auto outcome = inbox.record(tx, id);
    tx.commit();
    return outcome;
  });
  REQUIRE(waits_for_lock(second_conn.backendpid()));
  CHECK(second.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  first.commit();
  CHECK(second.get() == InboxOutcome::kDuplicate);
}

TEST_CASE("a concurrent second delivery waits for the first and does the work when it rolls back") {
  testenv::ScopedSchema schema("inbox");
  auto inbox = make_inbox(schema, "billing");
  auto id = MessageId::generate_v7();
  pqxx::connection first_conn(testenv::pg_dsn()), second_conn(testenv::pg_dsn());
  pqxx::work first(first_conn);
  REQUIRE(inbox.record(first, id) == InboxOutcome::kNew);

  auto second = std::async(std::launch::async, [&] {
    pqxx::work tx(second_conn);
    auto outcome = inbox.record(tx, id);
    tx.commit();
    return outcome;
  });
  REQUIRE(waits_for_lock(second_conn.backendpid()));
  first.abort();
  CHECK(second.get() == InboxOutcome::kNew);
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".inbox") == "1");
}

TEST_CASE("a unique violation other than the inbox key is raised, not taken for a duplicate") {
  testenv::ScopedSchema schema("inbox");
  const std::string s = schema.name();
  // A trigger that writes a row keyed on the consumer: a second message of the same
  // consumer violates audit_pkey, a constraint that is not the inbox's.
  testenv::sql_exec("CREATE TABLE " + s + ".audit (consumer text CONSTRAINT audit_pkey PRIMARY KEY)");
  testenv::sql_exec("CREATE FUNCTION " + s +
                    ".audit_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "INSERT INTO " +
                    s + ".audit VALUES (NEW.consumer); RETURN NEW; END $$");
  testenv::sql_exec("CREATE TRIGGER audit AFTER INSERT ON " + s + ".inbox FOR EACH ROW EXECUTE FUNCTION " + s +
                    ".audit_insert()");
  auto inbox = make_inbox(schema, "billing");
  auto first = MessageId::generate_v7();
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    REQUIRE(inbox.record(tx, first) == InboxOutcome::kNew);
    tx.commit();
  }
  {
    pqxx::work tx(conn);
    CHECK(inbox.record(tx, first) == InboxOutcome::kDuplicate);  // the real duplicate still is one
  }
  pqxx::work tx(conn);
  CHECK_THROWS_AS(inbox.record(tx, MessageId::generate_v7()), pqxx::unique_violation);
}

TEST_CASE("a natural-key insert tells a new key from an existing one without an exception") {
  testenv::ScopedSchema schema("natkey");
  testenv::sql_exec("CREATE TABLE " + schema.name() + ".invoices (order_id bigint PRIMARY KEY, amount_cents bigint)");
  outbox::NaturalKeyInsert insert(schema.name(), "invoices", {"order_id", "amount_cents"}, {"order_id"});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  CHECK(insert.insert(tx, 42, 1000) == outbox::InsertOutcome::kInserted);
  CHECK(insert.insert(tx, 42, 9999) == outbox::InsertOutcome::kAlreadyExists);
  CHECK(insert.insert(tx, 43, 500) == outbox::InsertOutcome::kInserted);
  tx.commit();
  CHECK(testenv::sql_value("SELECT amount_cents FROM " + schema.name() + ".invoices WHERE order_id = 42") == "1000");
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".invoices") == "2");
}

TEST_CASE("a natural-key insert racing an uncommitted one waits for it and inserts after its rollback") {
  testenv::ScopedSchema schema("natkey");
  testenv::sql_exec("CREATE TABLE " + schema.name() + ".invoices (order_id bigint PRIMARY KEY)");
  outbox::NaturalKeyInsert insert(schema.name(), "invoices", {"order_id"}, {"order_id"});
  pqxx::connection first_conn(testenv::pg_dsn()), second_conn(testenv::pg_dsn());
  pqxx::work first(first_conn);
  REQUIRE(insert.insert(first, 7) == outbox::InsertOutcome::kInserted);
  auto second = std::async(std::launch::async, [&] {
    pqxx::work tx(second_conn);
    auto outcome = insert.insert(tx, 7);
    tx.commit();
    return outcome;
  });
  REQUIRE(waits_for_lock(second_conn.backendpid()));
  first.abort();
  CHECK(second.get() == outbox::InsertOutcome::kInserted);
}

TEST_CASE("a state transition applies only from the expected state") {
  testenv::ScopedSchema schema("state");
  const std::string s = schema.name();
  testenv::sql_exec("CREATE TYPE " + s + ".payment_state AS ENUM ('pending', 'captured', 'refunded')");
  testenv::sql_exec("CREATE TABLE " + s + ".payments (id bigint PRIMARY KEY, state " + s + ".payment_state NOT NULL)");
  testenv::sql_exec("INSERT INTO " + s + ".payments VALUES (1, 'pending')");
  outbox::StateTransition transition(s, "payments", "id", "state");
  using outbox::TransitionOutcome;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  CHECK(transition.apply(tx, 1, {"pending"}, "captured") == TransitionOutcome::kApplied);
  CHECK(transition.apply(tx, 1, {"pending"}, "captured") == TransitionOutcome::kNotApplied);  // duplicate
  CHECK(transition.apply(tx, 1, {"captured"}, "refunded") == TransitionOutcome::kApplied);
  CHECK(transition.apply(tx, 1, {"pending"}, "captured") == TransitionOutcome::kNotApplied);  // late
  CHECK(transition.apply(tx, 2, {"pending"}, "captured") == TransitionOutcome::kNotApplied);  // no such row
  tx.commit();
  CHECK(testenv::sql_value("SELECT state FROM " + s + ".payments WHERE id = 1") == "refunded");
}
