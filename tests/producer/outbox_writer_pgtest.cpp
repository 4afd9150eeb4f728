#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <thread>

#include "outbox/embedded_migrations.h"
#include "outbox/errors.h"
#include "outbox/migrator.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_value;

namespace {

Message order_placed(int n) {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.ordering_key = "order-" + std::to_string(n);
  m.payload = R"({"order_id":)" + std::to_string(n) + "}";
  m.headers["tenant"] = "acme";
  m.correlation_id = "req-" + std::to_string(n);
  return m;
}

std::string count(const ScopedSchema& s) { return sql_value("SELECT count(*) FROM \"" + s.name() + "\".outbox"); }

}  // namespace

TEST_CASE("a committed enqueue leaves exactly the row the message describes") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto m = order_placed(7);
  m.payload = std::string("bin\0\xff\x01", 6);
  auto id = writer.enqueue(tx, m);
  tx.commit();

  pqxx::nontransaction q(conn);
  auto r =
      outbox::pgx::exec1(q,
                         "SELECT message_id::text, exchange, routing_key, message_type, ordering_key, content_type, "
                         "headers->>'tenant', correlation_id, payload, attempts, published_at IS NULL "
                         "FROM \"" +
                             schema.name() + "\".outbox");
  CHECK(r[0].as<std::string>() == id.to_string());
  CHECK(r[1].as<std::string>() == "orders");
  CHECK(r[2].as<std::string>() == "order.placed");
  CHECK(r[3].as<std::string>() == "OrderPlaced");
  CHECK(r[4].as<std::string>() == "order-7");
  CHECK(r[5].as<std::string>() == "application/json");
  CHECK(r[6].as<std::string>() == "acme");
  CHECK(r[7].as<std::string>() == "req-7");
  CHECK(outbox::pgx::bytea_of(r[8]) == std::string("bin\0\xff\x01", 6));
  CHECK(r[9].as<int>() == 0);
  CHECK(r[10].as<bool>());
}

TEST_CASE("a rolled-back transaction leaves no outbox row, together with the business row") {
  ScopedSchema schema;
  testenv::sql_exec("CREATE TABLE \"" + schema.name() + "\".orders (id int primary key)");
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    tx.exec("INSERT INTO \"" + schema.name() + "\".orders VALUES (1)");
    writer.enqueue(tx, order_placed(1));
    tx.abort();
  }
  CHECK(count(schema) == "0");
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".orders") == "0");
}

TEST_CASE("an enqueue outside a transaction (pqxx::nontransaction) is refused and writes nothing") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction autocommit(conn);
  // Each statement would commit on its own: the event, whatever became of the
  // business rows written around it.
  try {
    writer.enqueue(autocommit, order_placed(1));
    FAIL("enqueue through a nontransaction was accepted");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "transaction");
    CHECK(std::string(e.what()).find("pqxx::work") != std::string::npos);
  }
  CHECK_THROWS_AS(writer.enqueue_batch(autocommit, {order_placed(2), order_placed(3)}), ValidationError);
  CHECK(count(schema) == "0");
  // A subtransaction (a savepoint of the caller's transaction) is one.
  pqxx::connection other(testenv::pg_dsn());
  pqxx::work tx(other);
  pqxx::subtransaction savepoint(tx, "enqueue");
  writer.enqueue(savepoint, order_placed(4));
  savepoint.commit();
  tx.commit();
  CHECK(count(schema) == "1");
}

TEST_CASE("an enqueue in a subtransaction that is aborted is gone, though its transaction commits") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  {
    pqxx::subtransaction savepoint(tx, "enqueue");
    writer.enqueue(savepoint, order_placed(1));
    savepoint.abort();
  }
  writer.enqueue(tx, order_placed(2));
  tx.commit();
  CHECK(sql_value("SELECT string_agg(ordering_key, ',') FROM \"" + schema.name() + "\".outbox") == "order-2");
}

TEST_CASE("a batch writes every message in one statement with distinct ids in input order") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  std::vector<Message> batch;
  for (int i = 0; i < 300; ++i) batch.push_back(order_placed(i));
  batch[5].message_id = "0190b2b2-7c1e-7abc-8def-000000000005";
  pqxx::work tx(conn);
  auto ids = writer.enqueue_batch(tx, batch);
  tx.commit();
  REQUIRE(ids.size() == 300);
  CHECK(ids[5].to_string() == "0190b2b2-7c1e-7abc-8def-000000000005");
  CHECK(count(schema) == "300");
  CHECK(sql_value("SELECT count(DISTINCT message_id) FROM \"" + schema.name() + "\".outbox") == "300");
  // Identity order follows input order, so the relay publishes a batch in the order given.
  CHECK(sql_value("SELECT ordering_key FROM \"" + schema.name() + "\".outbox ORDER BY id LIMIT 1") == "order-0");
  CHECK(sql_value("SELECT message_id::text FROM \"" + schema.name() + "\".outbox WHERE ordering_key = 'order-5'") ==
        ids[5].to_string());
}

TEST_CASE("a batch with one bad message writes nothing") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  std::vector<Message> batch = {order_placed(1), order_placed(2)};
  batch[1].routing_key = RoutingKey("");
  pqxx::work tx(conn);
  CHECK_THROWS_AS(writer.enqueue_batch(tx, batch), ValidationError);
  tx.commit();
  CHECK(count(schema) == "0");
}

TEST_CASE("a traceparent the row's headers cannot hold is refused before the INSERT, and the transaction goes on") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  const std::string later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-";
  for (const std::string& bad : {later + "\xff", later + std::string("a\0b", 3)}) {
    auto m = order_placed(1);
    m.traceparent = bad;
    CHECK_THROWS_AS(writer.enqueue(tx, m), ValidationError);
  }
  writer.enqueue(tx, order_placed(2));  // the caller's transaction is still usable
  tx.commit();
  CHECK(count(schema) == "1");
}

TEST_CASE("a batch giving one message id to two messages is refused naming both, and the transaction goes on") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  std::vector<Message> batch = {order_placed(1), order_placed(2), order_placed(3)};
  batch[0].message_id = "0190b2b2-7c1e-7abc-8def-000000000001";
  batch[2].message_id = "0190B2B2-7C1E-7ABC-8DEF-000000000001";  // the same id, in capitals
  pqxx::work tx(conn);
  try {
    writer.enqueue_batch(tx, batch);
    FAIL("two messages with one id were accepted");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "message_id");
    CHECK(e.detail() ==
          "messages 0 and 2 of the batch both carry '0190b2b2-7c1e-7abc-8def-000000000001': "
          "one id names one message");
  }
  writer.enqueue(tx, order_placed(4));  // nothing written, and the transaction is still usable
  tx.commit();
  CHECK(count(schema) == "1");
}

TEST_CASE("re-enqueueing a message id that exists fails instead of duplicating it") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  auto m = order_placed(1);
  {
    pqxx::work tx(conn);
    m.message_id = writer.enqueue(tx, m).to_string();
    tx.commit();
  }
  pqxx::work tx(conn);
  CHECK_THROWS_AS(writer.enqueue(tx, m), pqxx::unique_violation);
}

TEST_CASE("migrating twice is a no-op and concurrent migrators both succeed") {
  auto name = testenv::unique_name("mig");
  std::vector<Migrator::Result> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      pqxx::connection conn(testenv::pg_dsn());
      results[i] = Migrator(name).migrate(conn);
    });
  for (auto& t : threads) t.join();
  CHECK(results[0].applied.size() + results[1].applied.size() == embedded_migrations().size());
  CHECK(results[0].version == results[1].version);
  pqxx::connection conn(testenv::pg_dsn());
  auto again = Migrator(name).migrate(conn);
  CHECK(again.applied.empty());
  CHECK(sql_value("SELECT count(*) FROM \"" + name + "\".outbox_migrations") ==
        std::to_string(embedded_migrations().size()));
  testenv::sql_exec("DROP SCHEMA \"" + name + "\" CASCADE");
}

TEST_CASE("a migration missing below the recorded version is still applied") {
  ScopedSchema schema;
  const std::string s = "\"" + schema.name() + "\"";
  // As if version 2 had been added after a later one was recorded.
  testenv::sql_exec("DROP TABLE " + s + ".inbox; DELETE FROM " + s + ".outbox_migrations WHERE version = 2");
  pqxx::connection conn(testenv::pg_dsn());
  auto result = Migrator(schema.name()).migrate(conn);
  CHECK(result.applied == std::vector<int>{2});
  CHECK(sql_value("SELECT count(*) FROM " + s + ".inbox") == "0");
}

TEST_CASE("the claim reads the pending-only index, not the published history") {
  ScopedSchema schema;
  const std::string t = "\"" + schema.name() + "\".outbox";
  testenv::sql_exec("INSERT INTO " + t +
                    " (message_id, exchange, routing_key, message_type, payload, published_at) "
                    "SELECT gen_random_uuid(), 'x', 'k', 'T', '\\x00', now() FROM generate_series(1, 50000)");
  testenv::sql_exec("INSERT INTO " + t +
                    " (message_id, exchange, routing_key, message_type, payload) "
                    "SELECT gen_random_uuid(), 'x', 'k', 'T', '\\x00' FROM generate_series(1, 100)");
  testenv::sql_exec("ANALYZE " + t);
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto plan = tx.exec("EXPLAIN SELECT id FROM " + t +
                      " WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at <= now() "
                      "ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED");
  std::string text;
  for (const auto& row : plan) text += std::string(row[0].c_str()) + "\n";
  MESSAGE(text);
  CHECK(text.find("outbox_pending_idx") != std::string::npos);
  CHECK(text.find("Seq Scan") == std::string::npos);
}
