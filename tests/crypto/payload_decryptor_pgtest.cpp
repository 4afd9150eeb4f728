// The consumer SDK's PayloadDecryptor: plaintext back for a good message, a
// PermanentError (dead-letter at once) for one that can never be restored, and a
// transient error when the key database is unreachable.
#include <doctest/doctest.h>

#include <future>
#include <pqxx/pqxx>
#include <regex>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/field_encryptor.h"
#include "outbox/outbox_writer.h"
#include "outbox/payload_decryptor.h"
#include "outbox/pqxx_compat.h"
#include "tcp_proxy.h"
#include "test_env.h"

using namespace outbox;
using nlohmann::json;
using testenv::ScopedSchema;

namespace {

struct Produced {
  MessageId id;
  std::string body;
};

Produced produce(const ScopedSchema& schema, const std::shared_ptr<const Keyring>& ring,
                 const std::shared_ptr<const SchemaRegistry>& schemas, const json& payload) {
  WriterOptions o;
  o.schema = schema.name();
  o.event_schemas = schemas;
  o.encryptor = std::make_shared<FieldEncryptor>(ring, std::make_shared<SubjectKeyStore>(schema.name(), ring));
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = payload.dump();
  auto id = OutboxWriter(o).enqueue(tx, m);
  auto body = outbox::pgx::bytea_of(outbox::pgx::exec_params1(
      tx, "SELECT payload FROM \"" + schema.name() + "\".outbox WHERE message_id = $1::uuid", id.to_string())[0]);
  tx.commit();
  return {id, body};
}

}  // namespace

TEST_CASE("a consumer restores the payload; tampering and erasure are permanent; a lost key database is not") {
  ScopedSchema schema("decrypt");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto schemas = std::make_shared<SchemaRegistry>(SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  auto ada = cryptotest::customer("a");
  const auto original = cryptotest::order_placed(1, ada);
  auto produced = produce(schema, ring, schemas, original);

  PayloadDecryptorOptions options;
  options.keyring = ring;
  options.event_schemas = schemas;
  options.subject_keys_dsn = testenv::pg_dsn();
  options.subject_keys_schema = schema.name();
  PayloadDecryptor decryptor(options);
  CHECK(decryptor.decrypt("OrderPlaced", produced.body, produced.id) == original.dump());
  Delivery delivery;
  delivery.message_id = produced.id;
  delivery.type = "OrderPlaced";
  delivery.body = produced.body;
  CHECK(decryptor.decrypt(delivery) == original.dump());

  auto tampered = json::parse(produced.body);
  cryptotest::flip_bit(tampered["customer"]["address"], "tag");
  CHECK_THROWS_AS(decryptor.decrypt("OrderPlaced", tampered.dump(), produced.id), PermanentError);
  CHECK_THROWS_AS(decryptor.decrypt("OrderPlaced", produced.body, MessageId::generate_v7()), PermanentError);

  SUBCASE("the key database is unreachable: transient, and the DSN is not echoed") {
    auto unreachable = options;
    unreachable.subject_keys_dsn = "host=127.0.0.1 port=1 user=x password=hunter2-secret connect_timeout=2";
    PayloadDecryptor offline(unreachable);
    try {
      offline.decrypt("OrderPlaced", produced.body, produced.id);
      FAIL("decrypted without the key database");
    } catch (const PermanentError&) {
      FAIL("an outage must not dead-letter the message");
    } catch (const std::exception& e) {
      CHECK_FALSE(cryptotest::contains(e.what(), "hunter2"));
    }
  }
  SUBCASE("a key database that accepts connections and never answers: transient, within subject_keys_timeout") {
    std::smatch port;
    const auto dsn = testenv::pg_dsn();
    REQUIRE(std::regex_search(dsn, port, std::regex(R"(port=(\d+))")));
    testenv::TcpProxy proxy("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port[1])));
    proxy.set_stalled(true);
    auto hung = options;
    hung.subject_keys_dsn = std::regex_replace(dsn, std::regex(R"(port=\d+)"), "port=" + std::to_string(proxy.port()));
    hung.subject_keys_timeout = std::chrono::milliseconds(2000);
    PayloadDecryptor behind_proxy(hung);
    const auto started = std::chrono::steady_clock::now();
    auto lookup = std::async(std::launch::async, [&] {
      try {
        behind_proxy.decrypt("OrderPlaced", produced.body, produced.id);
        return std::string("decrypted");
      } catch (const EnvironmentError&) {
        return std::string("EnvironmentError");
      } catch (const std::exception& e) {
        return std::string("other: ") + e.what();
      }
    });
    const bool in_time = lookup.wait_for(std::chrono::seconds(8)) == std::future_status::ready;
    proxy.set_stalled(false);  // lets a lookup that waits without a limit end, so the test can
    CHECK_MESSAGE(in_time, "the lookup still waited after 8 s");
    CHECK(lookup.get() == "EnvironmentError");
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(8));
  }
  SUBCASE("the subject is erased: permanent") {
    {
      pqxx::connection conn(testenv::pg_dsn());
      pqxx::work tx(conn);
      REQUIRE(SubjectKeyStore(schema.name(), ring).erase(tx, ada.id));
      tx.commit();
    }
    CHECK_THROWS_AS(decryptor.decrypt("OrderPlaced", produced.body, produced.id), SubjectErasedError);
  }
}
