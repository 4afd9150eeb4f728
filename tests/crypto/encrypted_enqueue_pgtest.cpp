// OutboxWriter with event schemas and field encryption against the real PostgreSQL:
// what lands in the outbox row, and that a bad payload writes nothing at all.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/field_decryptor.h"
#include "outbox/field_encryptor.h"
#include "outbox/field_envelope.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using cryptotest::contains;
using nlohmann::json;
using testenv::ScopedSchema;
using testenv::sql_value;

namespace {

struct Setup {
  ScopedSchema schema{"crypto"};
  std::shared_ptr<const Keyring> ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1",
                                                            cryptotest::key_texts({"b1"}), "b1");
  std::shared_ptr<const SchemaRegistry> schemas =
      std::make_shared<SchemaRegistry>(SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  std::shared_ptr<const SubjectKeyStore> store = std::make_shared<SubjectKeyStore>(schema.name(), ring);
  pqxx::connection conn{testenv::pg_dsn()};

  WriterOptions options(bool with_encryptor = true) const {
    WriterOptions o;
    o.schema = schema.name();
    o.event_schemas = schemas;
    if (with_encryptor) o.encryptor = std::make_shared<FieldEncryptor>(ring, store);
    return o;
  }
  FieldDecryptor decryptor() {
    return FieldDecryptor(ring, schemas, [this](const std::string& key_id) {
      pqxx::read_transaction tx(conn);
      return store->fetch(tx, key_id);
    });
  }
  std::string count(const std::string& table = "outbox") const {
    return sql_value("SELECT count(*) FROM \"" + schema.name() + "\"." + table);
  }
};

Message order_event(const json& payload, const std::string& type = "OrderPlaced") {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType(type);
  m.payload = payload.dump();
  return m;
}

}  // namespace

TEST_CASE("an encrypted enqueue stores envelopes bound to the row's message id, and they decrypt back") {
  Setup s;
  OutboxWriter writer(s.options());
  auto c = cryptotest::customer("e1");
  const auto original = cryptotest::order_placed(9, c);
  MessageId id;
  {
    pqxx::work tx(s.conn);
    id = writer.enqueue(tx, order_event(original));
    tx.commit();
  }
  std::string stored_id, stored;
  {
    pqxx::nontransaction q(s.conn);
    auto row = outbox::pgx::exec1(q, "SELECT message_id::text, payload FROM \"" + s.schema.name() + "\".outbox");
    stored_id = row[0].as<std::string>();
    stored = outbox::pgx::bytea_of(row[1]);
  }
  CHECK(stored_id == id.to_string());
  for (const auto& p : c.sensitive()) CHECK_FALSE(contains(stored, p));
  auto payload = json::parse(stored);
  CHECK(payload["order_id"] == 9);  // routing, metrics and tracing data stays readable
  CHECK(payload["customer"]["id"] == c.id);
  CHECK(payload["lines"][0]["sku"] == "BOOK-1");
  CHECK(payload["customer"]["email"].contains("skid"));

  CHECK(s.decryptor().decrypt("OrderPlaced", stored, id) == original.dump());
  // The row's id is the one the AAD binds: another id fails.
  CHECK_THROWS_AS(s.decryptor().decrypt("OrderPlaced", stored, MessageId::generate_v7()), DecryptionError);
}

TEST_CASE("a batch with one payload that breaks its schema writes no outbox row and no subject key") {
  Setup s;
  OutboxWriter writer(s.options());
  auto good = cryptotest::order_placed(1, cryptotest::customer("g"));
  auto bad = cryptotest::order_placed(2, cryptotest::customer("b"));
  bad["lines"][1].erase("price_cents");
  pqxx::work tx(s.conn);
  try {
    writer.enqueue_batch(tx, {order_event(good), order_event(bad)});
    FAIL("accepted a payload that breaks its schema");
  } catch (const SchemaValidationError& e) {
    CHECK(e.path() == "$.lines[1].price_cents");
  }
  tx.commit();  // even a caller that commits anyway finds nothing written
  CHECK(s.count() == "0");
  CHECK(s.count("outbox_subject_keys") == "0");
}

TEST_CASE("sensitive fields are never written in clear: no encryptor, no JSON or an unknown type is refused") {
  Setup s;
  auto payload = cryptotest::order_placed(1, cryptotest::customer("n"));
  pqxx::work tx(s.conn);
  CHECK_THROWS_WITH_AS(OutboxWriter(s.options(false)).enqueue(tx, order_event(payload)),
                       doctest::Contains("refusing to write them in clear"), ValidationError);
  auto not_json = order_event(payload);
  not_json.payload = "name=Ada";
  CHECK_THROWS_AS(OutboxWriter(s.options()).enqueue(tx, not_json), SchemaValidationError);

  auto strict = s.options();
  strict.require_event_schema = true;
  CHECK_THROWS_WITH_AS(OutboxWriter(strict).enqueue(tx, order_event({{"x", 1}}, "OrderShipped")),
                       doctest::Contains("no event schema describes 'OrderShipped'"), ValidationError);
  tx.commit();
  CHECK(s.count() == "0");
}

TEST_CASE("an amount a double cannot carry, or a payload nested too deep, is refused before anything is written") {
  Setup s;
  OutboxWriter writer(s.options());
  auto good = order_event(cryptotest::order_placed(1, cryptotest::customer("g")));
  auto big = order_event(cryptotest::order_placed(2, cryptotest::customer("b")));
  const auto at = big.payload.find("\"price_cents\":");
  REQUIRE(at != std::string::npos);
  big.payload.insert(at + 14, "123456789012345678901");  // then the original digits: still one number
  auto deep = order_event(cryptotest::order_placed(3, cryptotest::customer("d")));
  deep.payload = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  pqxx::work tx(s.conn);
  try {
    writer.enqueue_batch(tx, {good, big});
    FAIL("accepted an amount that encryption would have rounded");
  } catch (const SchemaValidationError& e) {
    CHECK(e.path() == "$.lines[0].price_cents");
    CHECK_FALSE(contains(e.what(), "123456789012345678901"));
  }
  CHECK_THROWS_WITH_AS(writer.enqueue_batch(tx, {good, deep}), doctest::Contains("nested deeper than 128 levels"),
                       SchemaValidationError);
  tx.commit();
  CHECK(s.count() == "0");
  CHECK(s.count("outbox_subject_keys") == "0");
}

TEST_CASE("a payload refused inside a sensitive value is named by that value's path, never by its keys") {
  // Free-form notes: their keys are as much the plaintext as their values.
  Setup s;
  auto registry = std::make_shared<SchemaRegistry>();
  registry->add(
      EventSchema::parse("x-event-type: PatientNote\ntype: object\nproperties:\n"
                         "  patient_id: {type: string}\n"
                         "  notes: {type: object, x-gdpr-sensitive: true, additionalProperties: true}\n",
                         "PatientNote.yaml"));
  auto options = s.options();
  options.event_schemas = registry;
  OutboxWriter writer(options);
  const auto refused_at = [&](const std::string& payload) {
    Message m = order_event({}, "PatientNote");
    m.payload = payload;
    pqxx::work tx(s.conn);
    try {
      writer.enqueue(tx, m);
    } catch (const SchemaValidationError& e) {
      CHECK_MESSAGE(!contains(e.what(), "hiv-positive"), e.what());
      return e.path();
    }
    return std::string("(accepted)");
  };
  CHECK(refused_at(R"({"patient_id": "p-1", "notes": {"hiv-positive": 1e400}})") == "$.notes");
  CHECK(refused_at(R"({"patient_id": "p-1", "notes": {"hiv-positive": 12345678901234567890123}})") == "$.notes");
  CHECK(refused_at(R"({"patient_id": "p-1", "notes": {"hiv-positive": )" + std::string(200, '[') +
                   std::string(200, ']') + "}}") == "$.notes");
  // Outside it the path is the payload's, as before.
  CHECK(refused_at(R"({"patient_id": "p-1", "extra": {"n": 1e400}})") == "$.extra.n");
  CHECK(s.count() == "0");
}

TEST_CASE("a type without a schema passes unchanged when schemas are optional") {
  Setup s;
  OutboxWriter writer(s.options());
  auto m = order_event({{"free", "form"}}, "AuditNote");
  m.payload = "{ \"free\" :  \"form\" }";  // byte for byte, not re-serialised
  pqxx::work tx(s.conn);
  writer.enqueue(tx, m);
  tx.commit();
  CHECK(sql_value("SELECT convert_from(payload, 'UTF8') FROM \"" + s.schema.name() + "\".outbox") == m.payload);
}

TEST_CASE("a payload that exceeds the size limit once encrypted is refused") {
  Setup s;
  auto options = s.options();
  auto payload = cryptotest::order_placed(1, cryptotest::customer("big"));
  options.limits.max_payload_bytes = payload.dump().size() + 10;  // fits in clear, not once encrypted
  pqxx::work tx(s.conn);
  CHECK_THROWS_WITH_AS(OutboxWriter(options).enqueue(tx, order_event(payload)), doctest::Contains("after encryption"),
                       ValidationError);
  tx.commit();
  CHECK(s.count() == "0");
}

TEST_CASE("a searchable field carries a blind index a consumer can match without decrypting") {
  Setup s;
  OutboxWriter writer(s.options());
  pqxx::work tx(s.conn);
  int n = 0;
  for (const char* email : {"ann@example.org", "bob@example.org", "ann@example.org"})
    writer.enqueue(tx,
                   order_event({{"subscription_id", "sub-" + std::to_string(++n)}, {"list", "news"}, {"email", email}},
                               "NewsletterSubscribed"));
  tx.commit();
  const auto wanted = cryptotest::base64(FieldEnvelope::blind_index(s.ring->index_active_key(), "subscriber_email",
                                                                    json("ann@example.org")));
  CHECK(sql_value("SELECT count(*) FROM \"" + s.schema.name() +
                  "\".outbox WHERE convert_from(payload, 'UTF8')::jsonb #>> '{email,bidx}' = '" + wanted + "'") == "2");
  CHECK(sql_value("SELECT count(*) FROM \"" + s.schema.name() +
                  "\".outbox WHERE convert_from(payload, 'UTF8') LIKE '%ann@%'") == "0");
}

TEST_CASE("a writer asked to require schemas or to encrypt, but given no event schemas, refuses to be built") {
  // It would accept any payload and write every field in clear.
  Setup s;
  auto strict = s.options();
  strict.event_schemas = nullptr;
  strict.require_event_schema = true;
  CHECK_THROWS_WITH_AS(OutboxWriter{strict},
                       doctest::Contains("event_schemas: not set, but require_event_schema is true and an encryptor"),
                       ValidationError);
  auto encrypting = s.options();
  encrypting.event_schemas = nullptr;
  CHECK_THROWS_WITH_AS(OutboxWriter{encrypting}, doctest::Contains("event_schemas: not set, but an encryptor is set"),
                       ValidationError);
  auto plain = s.options(false);
  plain.event_schemas = nullptr;
  plain.require_event_schema = true;
  CHECK_THROWS_WITH_AS(OutboxWriter{plain}, doctest::Contains("event_schemas: not set, but require_event_schema"),
                       ValidationError);
  plain.require_event_schema = false;
  CHECK_NOTHROW(OutboxWriter{plain});  // plain messages, no schemas: as before
}
