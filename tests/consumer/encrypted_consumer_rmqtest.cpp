// ConsumerRunner with PayloadDecryptor against the real RabbitMQ and PostgreSQL:
// an outage of the subject-key database is the environment's, never the message's.

#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <thread>

#include "../crypto/crypto_test_support.h"
#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/field_encryptor.h"
#include "outbox/outbox_writer.h"
#include "outbox/payload_decryptor.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pqxx_compat.h"
#include "tcp_proxy.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;

// An OrderPlaced enqueued with its customer's fields under a subject key, as the
// relay would publish it: its message id and body.
std::pair<std::string, std::string> encrypted_order(const testenv::ScopedSchema& schema,
                                                    const std::shared_ptr<const outbox::Keyring>& ring,
                                                    const std::shared_ptr<const outbox::SchemaRegistry>& schemas,
                                                    const cryptotest::Customer& customer) {
  outbox::WriterOptions o;
  o.schema = schema.name();
  o.event_schemas = schemas;
  o.encryptor = std::make_shared<outbox::FieldEncryptor>(ring, std::make_shared<outbox::SubjectKeyStore>(schema.name(),
                                                                                                         ring));
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  outbox::Message m;
  m.exchange = outbox::Exchange("orders");
  m.routing_key = outbox::RoutingKey("order.placed");
  m.type = outbox::MessageType("OrderPlaced");
  m.payload = cryptotest::order_placed(1, customer).dump();
  auto id = outbox::OutboxWriter(o).enqueue(tx, m);
  auto body = outbox::pgx::bytea_of(outbox::pgx::exec_params1(
      tx, "SELECT payload FROM \"" + schema.name() + "\".outbox WHERE message_id = $1::uuid", id.to_string())[0]);
  tx.commit();
  return {id.to_string(), body};
}

}  // namespace

TEST_CASE("an outage of the subject-key database requeues encrypted messages without dead-lettering them") {
  // The lookup failed as an ordinary exception, a counted try: an outage longer than
  // max_attempts tries (1.5 s with the defaults) dead-lettered every message under a
  // subject key, for an operator to requeue by hand.
  testenv::ScopedSchema schema("cdecrypt");
  testenv::ConsumerTopology topology("cdecrypt");
  testenv::sql_exec("CREATE TABLE \"" + schema.name() + "\".effects (body text)");
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto schemas =
      std::make_shared<outbox::SchemaRegistry>(outbox::SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  const auto customer = cryptotest::customer("outage");
  const auto [id, body] = encrypted_order(schema, ring, schemas, customer);

  auto key_db = outbox::PgConnInfo::parse(testenv::pg_dsn());
  testenv::TcpProxy proxy(key_db.get("host").value_or("127.0.0.1"),
                          static_cast<std::uint16_t>(std::stoi(key_db.get("port").value_or("5432"))));
  key_db.set("host", "127.0.0.1");
  key_db.set("port", std::to_string(proxy.port()));
  outbox::PayloadDecryptorOptions d;
  d.keyring = ring;
  d.event_schemas = schemas;
  d.subject_keys_dsn = key_db.to_string();
  d.subject_keys_schema = schema.name();
  outbox::PayloadDecryptor decryptor(d);
  proxy.set_refusing(true);  // the key database is down from the start

  auto options = topology.options(schema.name(), testenv::unique_name("consumer"));
  options.max_attempts = 2;
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& delivery) {
    outbox::pgx::exec_params(tx, "INSERT INTO \"" + schema.name() + "\".effects VALUES ($1)",
                             decryptor.decrypt(delivery));
  });
  runner.start();
  testenv::TestPublisher publisher;
  testenv::TestPublisher::Options p;
  p.type = "OrderPlaced";
  p.message_id = id;
  publisher.publish(topology.exchange, topology.routing_key, body, p);
  std::this_thread::sleep_for(3s);
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(runner.counters().retried >= 1);
  proxy.set_refusing(false);
  REQUIRE(testenv::eventually(20s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(testenv::queue_state(topology.dead_letter_queue).ready == 0);
  const auto plaintext = testenv::sql_value("SELECT body FROM \"" + schema.name() + "\".effects");
  CHECK(cryptotest::contains(plaintext, customer.email));
}
