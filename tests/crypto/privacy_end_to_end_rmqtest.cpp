// The real flow with encryption: an order-service-like producer enqueues OrderPlaced
// events with sensitive customer fields, the real relay publishes them to RabbitMQ.
// No sensitive plaintext may exist in the outbox table's bytes on disk, in the
// message bodies, or in the relay's log, and no key may appear in that log; the
// consumer holding the keyring restores every payload exactly.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <pqxx/pqxx>

#include "crypto_test_support.h"
#include "outbox/field_decryptor.h"
#include "outbox/field_encryptor.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using cryptotest::contains;
using nlohmann::json;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

constexpr int kOrders = 40;

// The raw bytes of a table's heap (and TOAST) files, after a checkpoint wrote
// the shared buffers out: what an attacker with the disk or a file backup sees.
std::string table_bytes(const std::string& qualified) {
  testenv::sql_exec("CHECKPOINT");
  std::string bytes;
  for (const auto& rel : {"'" + qualified + "'::regclass",
                          "(SELECT reltoastrelid FROM pg_class WHERE oid = '" + qualified + "'::regclass)"}) {
    const auto path = sql_value("SELECT pg_relation_filepath(" + rel + ")");
    if (path.empty()) continue;  // no TOAST table
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::nontransaction q(conn);
    auto r = outbox::pgx::exec_params1(q, "SELECT pg_read_binary_file($1, 0, pg_relation_size(" + rel + "))", path);
    bytes += outbox::pgx::bytea_of(r[0]);
  }
  return bytes;
}

}  // namespace

TEST_CASE("no sensitive plaintext reaches the outbox table's bytes, the broker or the relay log") {
  ScopedSchema schema("privacy");
  TestBroker broker("privacy", "order.placed");
  auto keys = cryptotest::key_texts({"k1", "k2"});
  auto index = cryptotest::key_texts({"b1"});
  const auto keyring_path = testenv::write_temp_file(cryptotest::keyring_yaml(keys, "k2", index, "b1"));
  REQUIRE(::chmod(keyring_path.c_str(), 0600) == 0);
  auto ring = std::make_shared<const Keyring>(Keyring::load_file(keyring_path));
  ::unlink(keyring_path.c_str());

  auto schemas = std::make_shared<SchemaRegistry>(SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  auto store = std::make_shared<SubjectKeyStore>(schema.name(), ring);
  WriterOptions options;
  options.schema = schema.name();
  options.event_schemas = schemas;
  options.require_event_schema = true;
  options.encryptor = std::make_shared<FieldEncryptor>(ring, store);
  OutboxWriter writer(options);

  // Like the order service: one order and its event per transaction.
  pqxx::connection conn(testenv::pg_dsn());
  std::map<std::string, json> sent;  // message id -> plaintext payload
  std::vector<std::string> secrets;
  const std::string run = std::to_string(::getpid());
  for (int n = 0; n < kOrders; ++n) {
    auto customer = cryptotest::customer(run + "x" + std::to_string(n % 7));
    for (const auto& s : customer.sensitive()) secrets.push_back(s);
    auto payload = cryptotest::order_placed(n, customer);
    Message m;
    m.exchange = Exchange(broker.exchange());
    m.routing_key = RoutingKey(broker.routing_key());
    m.type = MessageType("OrderPlaced");
    m.ordering_key = std::to_string(n);
    m.payload = payload.dump();
    pqxx::work tx(conn);
    sent[writer.enqueue(tx, m).to_string()] = payload;
    tx.commit();
  }

  RelayProcess relay(testenv::relay_config_yaml(schema.name()), /*exit_when_idle=*/true);
  const int code = relay.wait();
  const auto log = relay.log();
  REQUIRE(code == 0);
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL") ==
        std::to_string(kOrders));

  // 1. The table on disk: ids are there in clear (the bytes are the right ones), personal data is not.
  const auto outbox_bytes = table_bytes("\"" + schema.name() + "\".outbox");
  CHECK(contains(outbox_bytes, "cust-" + run + "x3"));
  const auto key_bytes = table_bytes("\"" + schema.name() + "\".outbox_subject_keys");
  const auto rows_text = sql_value("SELECT string_agg(o::text, E'\\n') FROM \"" + schema.name() + "\".outbox o");
  for (const auto& s : secrets) {
    CAPTURE(s);
    CHECK_FALSE(contains(outbox_bytes, s));
    CHECK_FALSE(contains(key_bytes, s));
    CHECK_FALSE(contains(rows_text, s));
  }

  // 2. The broker's copies: no plaintext in any body or header; each decrypts exactly.
  auto got = broker.receive(kOrders, std::chrono::milliseconds(3000));
  REQUIRE(got.size() == static_cast<std::size_t>(kOrders));
  pqxx::connection consumer_conn(testenv::pg_dsn());
  FieldDecryptor decryptor(ring, schemas, [&](const std::string& key_id) {
    pqxx::read_transaction tx(consumer_conn);
    return store->fetch(tx, key_id);
  });
  for (const auto& m : got) {
    REQUIRE(sent.count(m.message_id) == 1);
    for (const auto& s : secrets) {
      CHECK_FALSE(contains(m.body, s));
      for (const auto& [name, value] : m.headers) CHECK_FALSE(contains(value, s));
    }
    CHECK(json::parse(m.body)["customer"]["email"]["$enc"] == "v1");
    CHECK(decryptor.decrypt(m.type, m.body, MessageId::parse(m.message_id)) == sent[m.message_id].dump());
  }

  // 3. The relay's log (debug level): it worked, and never saw a value or a key.
  CHECK(contains(log, "relay stopped"));
  for (const auto& s : secrets) CHECK_FALSE(contains(log, s));
  for (const auto& k : {keys["k1"], keys["k2"], index["b1"]}) {
    CHECK_FALSE(contains(log, k));
    CHECK_FALSE(contains(log, k.substr(0, 16)));
  }
}
