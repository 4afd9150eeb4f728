// The C++ fragments of docs/CONSUMER.md and docs/ENCRYPTION.md, verbatim, each in a
// function that gives it the names it uses: this file compiles them against the real
// headers, so a renamed field or a changed signature breaks the build, not a reader's
// copy. doc_snippets_rmqtest checks that each marked block of the docs is an excerpt of
// this file (leading spaces aside). The fragments that need no server also run below.
// The fragments keep the docs' layout (two statements on a line, aligned comments), so
// clang-format leaves them alone.

#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include <doctest/doctest.h>
#include "outbox/consumer_runner.h"
#include "outbox/delivery.h"
#include "outbox/errors.h"
#include "outbox/field_encryptor.h"
#include "outbox/inbox.h"
#include "outbox/inbox_retention.h"
#include "outbox/keyring.h"
#include "outbox/outbox_writer.h"
#include "outbox/payload_decryptor.h"
#include "outbox/schema_registry.h"
#include "outbox/subject_key_store.h"

namespace {

struct Order {};
void create_invoice(pqxx::transaction_base&, const Order&) {}
void handle(pqxx::transaction_base&, const outbox::Delivery&) {}
void insert_invoice(pqxx::transaction_base&, const outbox::Delivery&) {}
outbox::Message invoice_created_event(const outbox::Delivery&) {
  outbox::Message m;
  m.exchange = outbox::Exchange("billing");
  m.routing_key = outbox::RoutingKey("invoice.created");
  m.type = outbox::MessageType("InvoiceCreated");
  m.payload = "{}";
  return m;
}

// clang-format off

// docs/CONSUMER.md, "The inbox"
[[maybe_unused]] void inbox_fragment(pqxx::connection& conn, const outbox::MessageId& message_id, const Order& order,
                                     void (*ack)()) {
  outbox::Inbox inbox({"billing", outbox::ConsumerName("billing")});
  pqxx::work tx(conn);
  if (inbox.record(tx, message_id, "OrderPlaced") == outbox::InboxOutcome::kDuplicate)
    return;                                  // already done: ack and do nothing
  create_invoice(tx, order);                 // the effect, in the same transaction
  tx.commit();                               // inbox row and effect commit together
  ack();                                     // only now
}

// docs/CONSUMER.md, "The runner"
[[maybe_unused]] int runner_fragment(const std::string& dsn, const std::string& uri) {
  outbox::RunnerOptions o;
  o.pg_dsn = dsn;  o.amqp_uri = uri;  o.schema = "billing";
  o.consumer = outbox::ConsumerName("billing");
  o.queue = "billing.order-placed";
  o.bindings = {{"orders", "order.placed", "topic"}};
  o.dead_letter_exchange = "billing.dead-letter";      // required
  o.concurrency = 4;
  outbox::ConsumerRunner runner(o, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    handle(tx, d);                                       // throw to fail the message
  });
  runner.run_until_signal();                             // SIGTERM/SIGINT: graceful stop
  return 0;
}

// docs/CONSUMER.md, "TLS"
outbox::RunnerOptions tls_fragment(outbox::RunnerOptions o, const std::string& password) {
  o.amqp_uri = "amqps://billing:" + password + "@mq.internal/prod";
  o.amqp_ca_file = "/etc/outbox/ca.crt";
  return o;
}

// docs/CONSUMER.md, "The consumer outbox"
auto consumer_outbox_fragment() {
  outbox::OutboxWriter writer({"billing", {}});
  auto handler = [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    insert_invoice(tx, d);
    writer.enqueue(tx, invoice_created_event(d));   // commits with the inbox row and the invoice
  };
  return std::make_pair(sizeof writer, sizeof handler);
}

// docs/CONSUMER.md, "Retention versus the redelivery horizon"
[[maybe_unused]] outbox::InboxRetention::PurgeResult retention_fragment(outbox::PgConnection& conn) {
  outbox::RetentionPolicy policy;              // retention 30 d, redelivery_horizon 14 d, batch 1000
  outbox::InboxRetention cleanup("billing", policy);   // throws if retention < horizon
  auto r = cleanup.purge(conn);                // r.removed rows, in r.batches transactions
  return r;
}

// docs/ENCRYPTION.md, "Producer"
[[maybe_unused]] void encrypting_writer_fragment() {
  auto keyring = std::make_shared<const outbox::Keyring>(outbox::Keyring::load_file("/etc/orders/keyring.yaml"));
  outbox::WriterOptions options;
  options.schema = "outbox";
  options.event_schemas = std::make_shared<outbox::SchemaRegistry>(
      outbox::SchemaRegistry::load_directory("schema/events"));
  options.require_event_schema = true;     // a type without a schema is refused
  options.encryptor = std::make_shared<outbox::FieldEncryptor>(
      keyring, std::make_shared<outbox::SubjectKeyStore>("outbox", keyring));  // store: only for x-gdpr-subject
  outbox::OutboxWriter writer(options);
}

// docs/ENCRYPTION.md, "Consumers"
[[maybe_unused]] std::string decryptor_fragment(std::shared_ptr<const outbox::Keyring> keyring,
                                                std::shared_ptr<const outbox::SchemaRegistry> schemas,
                                                const outbox::Delivery& delivery) {
  outbox::PayloadDecryptorOptions o;
  o.keyring = keyring;                       // every key still in use
  o.event_schemas = schemas;                 // recommended
  o.subject_keys_dsn = "...";                // the producers' database, for x-gdpr-subject
  o.subject_keys_schema = "outbox";
  o.subject_keys_timeout = std::chrono::seconds(5);  // the longest a key lookup waits (default)
  outbox::PayloadDecryptor decryptor(o);
  std::string plain = decryptor.decrypt(delivery.type, delivery.body, delivery.message_id);
  return plain;
}

// docs/CONSUMER.md, "Sequence guard"
outbox::RunnerOptions sequence_guard_fragment(outbox::RunnerOptions o) {
  o.bindings = {{"orders", "order.#", "topic"}};      // every event of an order's key
  o.sequence_guard = true;                             // migration 0017
  o.sequence_gap_alert = std::chrono::seconds(60);     // report a key waiting longer
  return o;
}

// clang-format on

}  // namespace

TEST_CASE("docs/CONSUMER.md's TLS fragment sets the URI and the CA file it shows") {
  auto o = tls_fragment({}, "secret");
  CHECK(o.amqp_uri == "amqps://billing:secret@mq.internal/prod");
  CHECK(o.amqp_ca_file == "/etc/outbox/ca.crt");
}

TEST_CASE("docs/CONSUMER.md's sequence-guard fragment turns the guard on with a valid alert bound") {
  auto o = sequence_guard_fragment({});
  CHECK(o.sequence_guard);
  o.pg_dsn = "host=db";
  o.amqp_uri = "amqp://u:p@mq/";
  o.consumer = outbox::ConsumerName("billing");
  o.queue = "billing";
  o.dead_letter_exchange = "billing.dead-letter";
  CHECK_NOTHROW(outbox::validate_runner_options(o));
  o.sequence_gap_alert = std::chrono::milliseconds(10);
  CHECK_THROWS_WITH_AS(outbox::validate_runner_options(o), doctest::Contains("sequence_gap_alert_ms"),
                       outbox::ValidationError);
}

TEST_CASE("docs/CONSUMER.md's consumer-outbox fragment builds a writer and a handler without a server") {
  auto [writer_size, handler_size] = consumer_outbox_fragment();
  CHECK(writer_size > 0);
  CHECK(handler_size > 0);
}

TEST_CASE("docs/CONSUMER.md's retention comment: the default policy is accepted, retention < horizon throws") {
  outbox::RetentionPolicy policy;
  CHECK_NOTHROW(outbox::InboxRetention("billing", policy));
  policy.retention = policy.redelivery_horizon - std::chrono::hours(1);
  CHECK_THROWS_AS(outbox::InboxRetention("billing", policy), outbox::ValidationError);
}
