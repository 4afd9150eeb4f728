// Crypto-shredding against the real PostgreSQL: one wrapped data key per subject,
// erasure, concurrent first events, and master-key rotation.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <thread>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/field_decryptor.h"
#include "outbox/field_encryptor.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using cryptotest::contains;
using nlohmann::json;
using testenv::ScopedSchema;
using testenv::sql_value;

namespace {

std::shared_ptr<const SchemaRegistry> schemas() {
  static auto r = std::make_shared<SchemaRegistry>(SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  return r;
}

Message order_event(const json& payload) {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = payload.dump();
  return m;
}

OutboxWriter writer_for(const ScopedSchema& schema, const std::shared_ptr<const Keyring>& ring) {
  WriterOptions o;
  o.schema = schema.name();
  o.event_schemas = schemas();
  o.encryptor = std::make_shared<FieldEncryptor>(ring, std::make_shared<SubjectKeyStore>(schema.name(), ring));
  return OutboxWriter(o);
}

// A consumer's decryptor: fetches subject keys with its own connection.
struct Consumer {
  pqxx::connection conn{testenv::pg_dsn()};
  SubjectKeyStore store;
  FieldDecryptor decryptor;
  Consumer(const ScopedSchema& schema, const std::shared_ptr<const Keyring>& ring)
      : store(schema.name(), ring), decryptor(ring, schemas(), [this](const std::string& key_id) {
          pqxx::read_transaction tx(conn);
          return store.fetch(tx, key_id);
        }) {}
};

struct Stored {
  MessageId id;
  std::string payload;
};

std::vector<Stored> stored_rows(const ScopedSchema& schema) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  std::vector<Stored> out;
  for (const auto& r : q.exec("SELECT message_id::text, payload FROM \"" + schema.name() + "\".outbox ORDER BY id"))
    out.push_back({MessageId::parse(r[0].as<std::string>()), outbox::pgx::bytea_of(r[1])});
  return out;
}

std::string keys_table(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox_subject_keys"; }

}  // namespace

TEST_CASE("each subject gets one data key, stored only wrapped, named in its envelopes") {
  ScopedSchema schema("shred");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto writer = writer_for(schema, ring);
  pqxx::connection conn(testenv::pg_dsn());
  auto ada = cryptotest::customer("a"), bob = cryptotest::customer("b");
  {
    pqxx::work tx(conn);
    writer.enqueue_batch(tx,
                         {order_event(cryptotest::order_placed(1, ada)), order_event(cryptotest::order_placed(2, bob)),
                          order_event(cryptotest::order_placed(3, ada))});
    tx.commit();
  }
  CHECK(sql_value("SELECT count(*) FROM " + keys_table(schema)) == "2");
  const auto ada_key = sql_value("SELECT key_id FROM " + keys_table(schema) + " WHERE subject = '" + ada.id + "'");
  CHECK(sql_value("SELECT wrapping_key_id FROM " + keys_table(schema) + " WHERE subject = '" + ada.id + "'") == "k1");
  CHECK(sql_value("SELECT length(wrapped_key) FROM " + keys_table(schema) + " WHERE subject = '" + ada.id + "'") ==
        "60");
  auto rows = stored_rows(schema);
  REQUIRE(rows.size() == 3);
  CHECK(json::parse(rows[0].payload)["customer"]["name"]["skid"] == ada_key);
  CHECK(json::parse(rows[2].payload)["customer"]["name"]["skid"] == ada_key);
  CHECK(json::parse(rows[1].payload)["customer"]["name"]["skid"] != ada_key);

  Consumer consumer(schema, ring);
  // The stored wrapped key is not the data key itself.
  pqxx::read_transaction tx(consumer.conn);
  auto dk = consumer.store.fetch(tx, ada_key);
  const std::string raw(reinterpret_cast<const char*>(dk.key.data()), SecretKey::kBytes);
  auto wrapped = outbox::pgx::bytea_of(outbox::pgx::exec1(tx, "SELECT wrapped_key FROM " + keys_table(schema) +
                                                                  " WHERE subject = '" + ada.id + "'")[0]);
  CHECK_FALSE(contains(wrapped, raw));
  tx.commit();
  CHECK(consumer.decryptor.decrypt("OrderPlaced", rows[1].payload, rows[1].id) ==
        cryptotest::order_placed(2, bob).dump());
}

TEST_CASE("erasing a subject makes every copy of its fields undecryptable and refuses new events for it") {
  ScopedSchema schema("shred");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto writer = writer_for(schema, ring);
  SubjectKeyStore store(schema.name(), ring);
  pqxx::connection conn(testenv::pg_dsn());
  auto ada = cryptotest::customer("a"), bob = cryptotest::customer("b");
  {
    pqxx::work tx(conn);
    writer.enqueue_batch(tx, {order_event(cryptotest::order_placed(1, ada)),
                              order_event(cryptotest::order_placed(2, bob))});
    tx.commit();
  }
  auto rows = stored_rows(schema);  // e.g. the copies a broker or a consumer kept
  {
    pqxx::work tx(conn);  // an erasure that rolls back changes nothing
    CHECK(store.erase(tx, ada.id));
    tx.abort();
  }
  Consumer consumer(schema, ring);
  CHECK(consumer.decryptor.decrypt("OrderPlaced", rows[0].payload, rows[0].id) ==
        cryptotest::order_placed(1, ada).dump());
  {
    pqxx::work tx(conn);
    CHECK(store.erase(tx, ada.id));
    CHECK_FALSE(store.erase(tx, ada.id));  // already erased
    tx.commit();
  }
  try {
    consumer.decryptor.decrypt("OrderPlaced", rows[0].payload, rows[0].id);
    FAIL("decrypted an erased subject's field");
  } catch (const SubjectErasedError& e) {
    CHECK(e.path() == "$.customer.name");
  }
  CHECK(consumer.decryptor.decrypt("OrderPlaced", rows[1].payload, rows[1].id) ==
        cryptotest::order_placed(2, bob).dump());
  CHECK(sql_value("SELECT wrapped_key IS NULL AND erased_at IS NOT NULL FROM " + keys_table(schema) +
                  " WHERE subject = '" + ada.id + "'") == "t");
  {
    pqxx::work tx(conn);  // no fresh key is minted for an erased subject
    CHECK_THROWS_AS(writer.enqueue(tx, order_event(cryptotest::order_placed(3, ada))), SubjectErasedError);
    tx.commit();
  }
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox") == "2");
  {
    pqxx::work tx(conn);  // a subject erased before it ever had a key is refused too
    CHECK_FALSE(store.erase(tx, "cust-never-seen"));
    tx.commit();
  }
  pqxx::work tx(conn);
  CHECK_THROWS_AS(writer.enqueue(tx, order_event(cryptotest::order_placed(4, cryptotest::customer("never-seen")))),
                  SubjectErasedError);
}

TEST_CASE("concurrent first events for one subject end with one key that decrypts both") {
  ScopedSchema schema("shred");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto writer = writer_for(schema, ring);
  auto ada = cryptotest::customer("a");
  pqxx::connection first_conn(testenv::pg_dsn()), second_conn(testenv::pg_dsn());
  pqxx::work first(first_conn);
  writer.enqueue(first, order_event(cryptotest::order_placed(1, ada)));
  std::thread second_writer([&] {
    pqxx::work second(second_conn);  // blocks on the subject's row until `first` commits
    writer.enqueue(second, order_event(cryptotest::order_placed(2, ada)));
    second.commit();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first.commit();
  second_writer.join();
  CHECK(sql_value("SELECT count(*) FROM " + keys_table(schema)) == "1");
  Consumer consumer(schema, ring);
  auto rows = stored_rows(schema);
  REQUIRE(rows.size() == 2);
  for (std::size_t i = 0; i < rows.size(); ++i)
    CHECK(json::parse(consumer.decryptor.decrypt("OrderPlaced", rows[i].payload, rows[i].id))["customer"]["name"] ==
          ada.name);
}

TEST_CASE("an erasure that races the subject's first event destroys the key that event commits") {
  ScopedSchema schema("shred");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto writer = writer_for(schema, ring);
  SubjectKeyStore store(schema.name(), ring);
  auto ada = cryptotest::customer("a");
  pqxx::connection first_conn(testenv::pg_dsn()), eraser_conn(testenv::pg_dsn());
  pqxx::work first(first_conn);  // mints ada's key, not committed yet
  writer.enqueue(first, order_event(cryptotest::order_placed(1, ada)));
  bool destroyed = false;
  std::thread eraser([&] {
    pqxx::work tx(eraser_conn);  // waits on the subject's row until `first` commits
    destroyed = store.erase(tx, ada.id);
    tx.commit();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first.commit();
  eraser.join();
  CHECK(destroyed);
  CHECK(sql_value("SELECT count(*) FILTER (WHERE wrapped_key IS NULL AND erased_at IS NOT NULL) || '/' || count(*) "
                  "FROM " +
                  keys_table(schema)) == "1/1");
  auto rows = stored_rows(schema);
  REQUIRE(rows.size() == 1);
  Consumer consumer(schema, ring);
  CHECK_THROWS_AS(consumer.decryptor.decrypt("OrderPlaced", rows[0].payload, rows[0].id), SubjectErasedError);
  pqxx::work tx(first_conn);  // and no new key is minted for the subject
  CHECK_THROWS_AS(writer.enqueue(tx, order_event(cryptotest::order_placed(2, ada))), SubjectErasedError);
}

TEST_CASE("after master-key rotation, rewrap moves subject keys to the new key and the old one can retire") {
  ScopedSchema schema("shred");
  auto keys = cryptotest::key_texts({"k1", "k2"});
  auto old_ring = cryptotest::keyring({{"k1", keys["k1"]}}, "k1");
  auto ada = cryptotest::customer("a");
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    writer_for(schema, old_ring).enqueue(tx, order_event(cryptotest::order_placed(1, ada)));
    tx.commit();
  }
  auto rotated = cryptotest::keyring(keys, "k2");
  {
    pqxx::work tx(conn);
    CHECK(SubjectKeyStore(schema.name(), rotated).rewrap(tx, 100).rewrapped == 1);
    const auto again = SubjectKeyStore(schema.name(), rotated).rewrap(tx, 100);
    CHECK(again.rewrapped == 0);
    CHECK(again.skipped() == 0);
    CHECK(again.skipped_text().empty());
    tx.commit();
  }
  CHECK(sql_value("SELECT wrapping_key_id FROM " + keys_table(schema)) == "k2");
  auto only_new = cryptotest::keyring({{"k2", keys["k2"]}}, "k2");
  Consumer consumer(schema, only_new);
  auto rows = stored_rows(schema);
  CHECK(consumer.decryptor.decrypt("OrderPlaced", rows[0].payload, rows[0].id) ==
        cryptotest::order_placed(1, ada).dump());
}

TEST_CASE("rewrap skips keys wrapped by a master key no longer in the keyring, names that key, and moves the rest") {
  ScopedSchema schema("shred");
  auto keys = cryptotest::key_texts({"k0", "k1", "k2"});
  // ada's key under k0, which is later removed; bob's and cy's under k1. ada sorts
  // first, where a rewrap that stopped at her row would stop every batch.
  auto ada = cryptotest::customer("a"), bob = cryptotest::customer("b"), cy = cryptotest::customer("c");
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    writer_for(schema, cryptotest::keyring({{"k0", keys["k0"]}}, "k0"))
        .enqueue(tx, order_event(cryptotest::order_placed(1, ada)));
    auto k1_writer = writer_for(schema, cryptotest::keyring({{"k1", keys["k1"]}}, "k1"));
    k1_writer.enqueue_batch(tx, {order_event(cryptotest::order_placed(2, bob)),
                                 order_event(cryptotest::order_placed(3, cy))});
    tx.commit();
  }
  const auto ada_before = sql_value("SELECT encode(wrapped_key, 'hex') FROM " + keys_table(schema) +
                                    " WHERE subject = '" + ada.id + "'");
  // k0 left the keyring before its keys were rewrapped.
  SubjectKeyStore store(schema.name(), cryptotest::keyring({{"k1", keys["k1"]}, {"k2", keys["k2"]}}, "k2"));
  pqxx::work tx(conn);
  std::size_t moved = 0;
  for (int call = 0; call < 3; ++call) {
    const auto result = store.rewrap(tx, 1);
    CAPTURE(call);
    CHECK(result.rewrapped == (call < 2 ? 1u : 0u));
    moved += result.rewrapped;
    CHECK(result.skipped() == 1);
    CHECK(result.skipped_by_master_key == std::map<std::string, std::size_t>{{"k0", 1}});
    CHECK(result.skipped_text() ==
          "1 subject key is wrapped by master keys that are not in the keyring and were not rewrapped: 'k0' (1); "
          "add those keys to the keyring to rewrap them");
    for (const auto& [id, text] : keys) CHECK_FALSE(contains(result.skipped_text(), text));
  }
  tx.commit();
  CHECK(moved == 2);
  CHECK(sql_value("SELECT string_agg(subject || ':' || wrapping_key_id, ',' ORDER BY subject) FROM " +
                  keys_table(schema)) == ada.id + ":k0," + bob.id + ":k2," + cy.id + ":k2");
  CHECK(sql_value("SELECT encode(wrapped_key, 'hex') FROM " + keys_table(schema) + " WHERE subject = '" + ada.id +
                  "'") == ada_before);  // untouched: k0 back in a keyring still unwraps it
}

TEST_CASE("a tampered or swapped wrapped key fails to unwrap") {
  ScopedSchema schema("shred");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto writer = writer_for(schema, ring);
  auto ada = cryptotest::customer("a"), bob = cryptotest::customer("b");
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    writer.enqueue_batch(tx, {order_event(cryptotest::order_placed(1, ada)),
                              order_event(cryptotest::order_placed(2, bob))});
    tx.commit();
  }
  auto rows = stored_rows(schema);
  Consumer consumer(schema, ring);
  SUBCASE("a flipped byte") {
    testenv::sql_exec("UPDATE " + keys_table(schema) +
                      " SET wrapped_key = overlay(wrapped_key placing '\\xff'::bytea from 20 for 1) WHERE subject = '" +
                      ada.id + "'");
  }
  SUBCASE("bob's wrapped key copied onto ada's row") {
    testenv::sql_exec("UPDATE " + keys_table(schema) + " a SET wrapped_key = b.wrapped_key FROM " + keys_table(schema) +
                      " b WHERE a.subject = '" + ada.id + "' AND b.subject = '" + bob.id + "'");
  }
  CHECK_THROWS_AS(consumer.decryptor.decrypt("OrderPlaced", rows[0].payload, rows[0].id), DecryptionError);
}
