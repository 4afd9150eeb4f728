// Migration 0016: each keyed row gets its key's next sequence number in the
// producer's transaction, whoever writes it (SDK, enqueue(), a plain INSERT), with no
// gap after a rollback, in commit order for one key, and no way to choose or change it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

Message keyed(const std::string& key) {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.ordering_key = key;
  m.payload = "{}";
  return m;
}

// The sequence numbers of `key`'s rows in id order, e.g. "1,2,3"; "" for none.
std::string seqs(const ScopedSchema& s, const std::string& key) {
  return sql_value("SELECT coalesce(string_agg(coalesce(key_seq::text, 'null'), ',' ORDER BY id), '') FROM \"" +
                   s.name() + "\".outbox WHERE ordering_key = '" + key + "'");
}

// Enqueues one message of `key` with the SDK in a transaction of its own.
void enqueue(const ScopedSchema& s, const std::string& key, bool commit = true) {
  OutboxWriter writer({s.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  writer.enqueue(tx, keyed(key));
  if (commit) tx.commit();
}

}  // namespace

TEST_CASE("keyed rows are numbered 1, 2, 3 per key, whoever writes them; unkeyed rows get no number") {
  ScopedSchema schema;
  const auto t = "\"" + schema.name() + "\".outbox";
  enqueue(schema, "order-1");
  enqueue(schema, "order-2");
  enqueue(schema, "order-1");
  // The SQL contract's enqueue() and a plain INSERT go through the same trigger.
  sql_exec("SELECT \"" + schema.name() + "\".enqueue('orders', 'rk', 'T', '\\x01', ordering_key => 'order-1')");
  sql_exec("INSERT INTO " + t +
           " (message_id, exchange, routing_key, message_type, ordering_key, payload) "
           "VALUES (gen_random_uuid(), 'orders', 'rk', 'T', 'order-1', '\\x01')");
  enqueue(schema, "");
  CHECK(seqs(schema, "order-1") == "1,2,3,4");
  CHECK(seqs(schema, "order-2") == "1");
  CHECK(seqs(schema, "") == "null");
  CHECK(sql_value("SELECT last_seq FROM \"" + schema.name() +
                  "\".outbox_key_sequences WHERE ordering_key = 'order-1'") == "4");
}

TEST_CASE("a rolled-back enqueue leaves no gap in its key's sequence") {
  ScopedSchema schema;
  enqueue(schema, "k");
  enqueue(schema, "k", /*commit=*/false);
  enqueue(schema, "k", /*commit=*/false);
  enqueue(schema, "k");
  CHECK(seqs(schema, "k") == "1,2");
  // A savepoint rolled back inside a committed transaction gives its number back too.
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    tx.exec("SAVEPOINT before_event");
    writer.enqueue(tx, keyed("k"));
    tx.exec("ROLLBACK TO SAVEPOINT before_event");
    writer.enqueue(tx, keyed("k"));
    tx.commit();
  }
  CHECK(seqs(schema, "k") == "1,2,3");
}

TEST_CASE("a second producer of the same key waits for the first, so commit order is sequence order") {
  ScopedSchema schema;
  const auto t = "\"" + schema.name() + "\".outbox";
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection first(testenv::pg_dsn());
  pqxx::work first_tx(first);
  writer.enqueue(first_tx, keyed("k"));  // number 1, its counter row locked until the end

  // Another key is not held up meanwhile.
  enqueue(schema, "other");
  CHECK(seqs(schema, "other") == "1");

  std::atomic<bool> second_done{false};
  auto second = std::async(std::launch::async, [&] {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    writer.enqueue(tx, keyed("k"));
    tx.commit();
    second_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(second_done.load());  // waiting for the first producer's transaction
  CHECK(sql_value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%" +
                  schema.name() + "%'") == "1");
  first_tx.commit();
  second.get();
  CHECK(second_done.load());
  CHECK(seqs(schema, "k") == "1,2");
  // Ids are not commit order, sequences are: the first transaction's row has number 1.
  CHECK(sql_value("SELECT key_seq FROM " + t + " WHERE ordering_key = 'k' ORDER BY id LIMIT 1") == "1");
}

TEST_CASE("when the first producer of a key rolls back, the waiting one takes its number") {
  ScopedSchema schema;
  OutboxWriter writer({schema.name(), {}});
  enqueue(schema, "k");
  pqxx::connection first(testenv::pg_dsn());
  auto first_tx = std::make_unique<pqxx::work>(first);
  writer.enqueue(*first_tx, keyed("k"));  // would be 2
  auto second = std::async(std::launch::async, [&] { enqueue(schema, "k"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first_tx->abort();
  second.get();
  CHECK(seqs(schema, "k") == "1,2");
}

TEST_CASE("a number cannot be chosen at insert nor changed after, nor can the key") {
  ScopedSchema schema;
  const auto t = "\"" + schema.name() + "\".outbox";
  enqueue(schema, "k");
  // A number written by hand is replaced on a keyed row and dropped on an unkeyed one.
  sql_exec("INSERT INTO " + t +
           " (message_id, exchange, routing_key, message_type, ordering_key, payload, key_seq) "
           "VALUES (gen_random_uuid(), 'orders', 'rk', 'T', 'k', '\\x01', 99)");
  sql_exec("INSERT INTO " + t +
           " (message_id, exchange, routing_key, message_type, ordering_key, payload, key_seq) "
           "VALUES (gen_random_uuid(), 'orders', 'rk', 'T', '', '\\x01', 7)");
  CHECK(seqs(schema, "k") == "1,2");
  CHECK(seqs(schema, "") == "null");
  // Changing either is refused, naming the row; the relay's own updates pass.
  const auto first = sql_value("SELECT min(id) FROM " + t);
  const auto r = testenv::sql_error_of("UPDATE " + t + " SET key_seq = 5 WHERE id = " + first);
  CHECK_MESSAGE(r.rfind("55000: ", 0) == 0, r);
  CHECK_MESSAGE(r.find("outbox row " + first +
                       ": key_seq and ordering_key are assigned at enqueue and cannot change") != std::string::npos,
                r);
  CHECK(testenv::sql_error_of("UPDATE " + t + " SET ordering_key = 'j' WHERE id = " + first).rfind("55000: ", 0) == 0);
  CHECK(testenv::sql_error_of("UPDATE " + t + " SET published_at = now(), attempts = 1 WHERE id = " + first) ==
        "nothing raised");
  CHECK(seqs(schema, "k") == "1,2");
}

TEST_CASE("a key whose counter row was deleted starts again at 1, as documented") {
  // Only the schema's owner can do this (the table is revoked from PUBLIC); the
  // consumer's guard reports the sequence gone back instead of applying it.
  ScopedSchema schema;
  enqueue(schema, "k");
  enqueue(schema, "k");
  sql_exec("DELETE FROM \"" + schema.name() + "\".outbox_key_sequences WHERE ordering_key = 'k'");
  enqueue(schema, "k");
  CHECK(seqs(schema, "k") == "1,2,1");
}

TEST_CASE("rows written before migration 0016 keep no number; the key's next row starts at 1") {
  ScopedSchema schema("t", 15);
  enqueue(schema, "k");
  schema.migrate();
  enqueue(schema, "k");
  CHECK(seqs(schema, "k") == "null,1");
}
