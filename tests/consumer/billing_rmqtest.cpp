// The billing example on the real servers: four workers, the same order delivered
// twice at once, a 200 ms payment gateway. What each handler design ends with.

#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "billing_schema.h"
#include "consumer_test_support.h"
#include "fake_payment_gateway.h"
#include "invoice_handler.h"
#include "order_placed.h"
#include "outbox/consumer_runner.h"
#include "payment_handler.h"
#include "test_env.h"
#include "test_text.h"

namespace {

using namespace std::chrono_literals;
using billing::InvoiceStrategy;
using outbox::Deduplication;
using outbox::MessageId;

constexpr int kConcurrency = 4;

struct BillingFixture {
  testenv::ScopedSchema schema{"billing"};
  testenv::ConsumerTopology topology{"billing"};
  testenv::TestPublisher publisher;
  billing::FakePaymentGateway gateway;  // 200 ms per charge, as in production-like runs

  explicit BillingFixture(bool unique_order_key) {
    pqxx::connection conn(testenv::pg_dsn());
    billing::create_billing_schema(conn, schema.name(), unique_order_key);
  }
  const std::string& s() const { return schema.name(); }

  outbox::RunnerOptions options(Deduplication dedup) const {
    auto o = topology.options(s(), "billing", kConcurrency);
    o.dedup = dedup;
    return o;
  }
  // Starts the runner and waits until all its workers consume, so two copies
  // published back to back go to two workers at once (prefetch 1 each).
  void start(outbox::ConsumerRunner& runner) const {
    runner.start();
    REQUIRE(testenv::eventually(10s, [&] { return testenv::consumer_count(topology.queue) == kConcurrency; }));
  }
  void publish(const std::string& type, const std::string& body, const std::string& message_id) {
    testenv::TestPublisher::Options o;
    o.type = type;
    o.message_id = message_id;
    publisher.publish(topology.exchange, topology.routing_key, body, o);
  }
  void publish_order(std::int64_t order_id, const std::string& message_id) {
    publish("OrderPlaced", billing::order_placed_json(order_id, 4200), message_id);
  }
  // Waits until `n` deliveries were settled (processed or skipped), then stops.
  static void settle(outbox::ConsumerRunner& runner, std::uint64_t n) {
    REQUIRE(testenv::eventually(20s, [&] { return runner.counters().processed + runner.counters().duplicates >= n; }));
    runner.stop();
    runner.wait();
  }
  int invoices() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + s() + ".invoices")); }

  // Fails the first COMMIT that wrote an invoice (a deferred constraint trigger; the
  // sequence counts across the rollback).
  void fail_first_invoice_commit() const {
    testenv::sql_exec("CREATE SEQUENCE " + s() + ".commits");
    testenv::sql_exec("CREATE FUNCTION " + s() +
                      ".fail_first() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                      "IF nextval('" +
                      s() +
                      ".commits') = 1 THEN RAISE EXCEPTION 'injected commit failure'; "
                      "END IF; RETURN NULL; END $$");
    testenv::sql_exec("CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON " + s() +
                      ".invoices DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + s() + ".fail_first()");
  }
};

}  // namespace

TEST_CASE("a naive check-then-act handler given one message twice at once makes 2 invoices and 2 charges") {
  BillingFixture f(/*unique_order_key=*/false);
  f.gateway.meet_before_charging(2, 10s);  // both checks pass before either inserts
  billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kCheckThenAct, false}, f.gateway);
  outbox::ConsumerRunner runner(f.options(Deduplication::kNone), std::ref(handler));
  f.start(runner);
  auto id = MessageId::generate_v7().to_string();
  f.publish_order(1001, id);
  f.publish_order(1001, id);  // a redelivery of the very same message
  BillingFixture::settle(runner, 2);
  CHECK(f.invoices() == 2);
  CHECK(f.gateway.charges_taken() == 2);
}

TEST_CASE("with the inbox, one message delivered twice at once makes 1 invoice and 1 charge") {
  BillingFixture f(/*unique_order_key=*/false);  // no help from a unique key: the inbox alone
  billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kCheckThenAct, false}, f.gateway);
  outbox::ConsumerRunner runner(f.options(Deduplication::kInbox), std::ref(handler));
  f.start(runner);
  auto id = MessageId::generate_v7().to_string();
  f.publish_order(1002, id);
  f.publish_order(1002, id);
  BillingFixture::settle(runner, 2);
  CHECK(f.invoices() == 1);
  CHECK(f.gateway.charges_taken() == 1);
  CHECK(runner.counters().processed == 1);
  CHECK(runner.counters().duplicates == 1);
}

TEST_CASE("one order published under two message ids defeats the inbox alone") {
  BillingFixture f(/*unique_order_key=*/false);
  f.gateway.meet_before_charging(2, 10s);  // both checks pass before either inserts
  billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kCheckThenAct, false}, f.gateway);
  outbox::ConsumerRunner runner(f.options(Deduplication::kInbox), std::ref(handler));
  f.start(runner);
  f.publish_order(1003, MessageId::generate_v7().to_string());
  f.publish_order(1003, MessageId::generate_v7().to_string());  // e.g. a producer retry with a new id
  BillingFixture::settle(runner, 2);
  CHECK(runner.counters().duplicates == 0);
  CHECK(f.invoices() == 2);
  CHECK(f.gateway.charges_taken() == 2);
}

TEST_CASE("the natural-key handler gives one order under two message ids 1 invoice and 1 charge") {
  BillingFixture f(/*unique_order_key=*/true);
  // No idempotency key: the natural key alone must prevent the second charge.
  billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kNaturalKey, false}, f.gateway);
  outbox::ConsumerRunner runner(f.options(Deduplication::kInbox), std::ref(handler));
  f.start(runner);
  f.publish_order(1004, MessageId::generate_v7().to_string());
  f.publish_order(1004, MessageId::generate_v7().to_string());
  BillingFixture::settle(runner, 2);
  CHECK(runner.counters().processed == 2);
  CHECK(f.invoices() == 1);
  CHECK(f.gateway.charges_taken() == 1);
  CHECK(testenv::sql_value("SELECT charge_id FROM " + f.s() + ".invoices") == "ch_1");
}

TEST_CASE("a charge retried after a failed commit is taken once with the idempotency key, twice without") {
  for (bool with_key : {true, false}) {
    CAPTURE(with_key);
    BillingFixture f(/*unique_order_key=*/true);
    f.fail_first_invoice_commit();
    billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kNaturalKey, with_key}, f.gateway);
    outbox::ConsumerRunner runner(f.options(Deduplication::kInbox), std::ref(handler));
    f.start(runner);
    f.publish_order(1005, MessageId::generate_v7().to_string());
    BillingFixture::settle(runner, 1);
    CHECK(runner.counters().failed == 1);  // the commit failed once, the retry committed
    CHECK(f.invoices() == 1);
    CHECK(f.gateway.charges_taken() == (with_key ? 1u : 2u));
  }
}

TEST_CASE("a payment state machine fed triplicates and late, out-of-order messages ends in the right state") {
  BillingFixture f(/*unique_order_key=*/true);
  billing::PaymentHandler handler(f.s());
  // Dedup kNone: the transitions alone must make repeats harmless.
  auto options = f.options(Deduplication::kNone);
  options.max_attempts = 50;  // a refund that overtook its capture is retried until the capture is in
  options.retry_delay = 20ms;
  options.retry_delay_max = 100ms;
  outbox::ConsumerRunner runner(options, std::ref(handler));
  f.start(runner);

  // Payment 1: captured three times at once (one message, three deliveries), then
  // refunded, then a late capture under a new message id.
  auto capture1 = MessageId::generate_v7().to_string();
  for (int i = 0; i < 3; ++i) f.publish("PaymentCaptured", billing::payment_event_json(1, 501), capture1);
  f.publish("PaymentRefunded", billing::payment_event_json(1, 501), MessageId::generate_v7().to_string());
  f.publish("PaymentCaptured", billing::payment_event_json(1, 501), MessageId::generate_v7().to_string());
  // Payment 2: the refund overtakes the capture, which then arrives three times.
  f.publish("PaymentRefunded", billing::payment_event_json(2, 502), MessageId::generate_v7().to_string());
  for (int i = 0; i < 3; ++i)
    f.publish("PaymentCaptured", billing::payment_event_json(2, 502), MessageId::generate_v7().to_string());

  BillingFixture::settle(runner, 9);  // 5 + 4 deliveries
  CHECK(runner.counters().dead_lettered == 0);
  for (int payment : {1, 2}) {
    CAPTURE(payment);
    const std::string where = " WHERE payment_id = " + std::to_string(payment);
    CHECK(testenv::sql_value("SELECT state FROM " + f.s() + ".payments" + where) == "refunded");
    CHECK(testenv::sql_value("SELECT string_agg(state, ',' ORDER BY id) FROM " + f.s() + ".payment_history" + where) ==
          "captured,refunded");
  }
}

namespace {

// The PermanentError message parse_order_placed refuses `payload` with, or "(accepted)".
std::string refusal(const std::string& payload) {
  return testenv::error_of<outbox::PermanentError>([&] { billing::parse_order_placed(payload); }, "(accepted)");
}

using testenv::contains;

}  // namespace

TEST_CASE("an OrderPlaced the billing service cannot charge is refused, naming the field and the reason") {
  const std::string customer = R"("customer":{"id":"c-1"})";
  auto order = [&](const std::string& total, const std::string& currency = R"("EUR")") {
    return R"({"order_id":7,"total_cents":)" + total + R"(,"currency":)" + currency + "," + customer + "}";
  };
  CHECK(refusal(order("4200")) == "(accepted)");
  CHECK(refusal(order("100000000")) == "(accepted)");  // kMaxTotalCents itself
  CHECK(contains(refusal(order("-99999999")), "'total_cents' is -99999999, below the minimum of 1"));
  CHECK(contains(refusal(order("0")), "'total_cents' is 0, below the minimum of 1"));
  CHECK(contains(refusal(order("100000001")), "'total_cents' is 100000001, above the maximum of 100000000"));
  CHECK(contains(refusal(order("18446744073709551615")), "'total_cents' is 18446744073709551615, above the maximum"));
  CHECK(contains(refusal(order("42.5")), "'total_cents' is not an integer"));
  CHECK(contains(refusal(order("1e30")), "'total_cents' is not an integer"));
  CHECK(contains(refusal(order(R"("4200")")), "'total_cents' is not an integer"));
  CHECK(contains(refusal(order("4200", R"("XXX")")), "'currency' is 'XXX', not one billing accepts"));
  CHECK(contains(refusal(order("4200", R"("eur\r\nINFO forged")")), "'currency' is 'eur\\r\\nINFO forged'"));
  CHECK(contains(refusal(order("4200", "978")), "'currency' is not a string"));
  CHECK(contains(refusal(R"({"order_id":7,"total_cents":4200,)" + customer + "}"), "'currency' is missing"));
  CHECK(contains(refusal(R"({"order_id":-7,"total_cents":4200,"currency":"EUR",)" + customer + "}"),
                 "'order_id' is -7, below the minimum of 1"));
  CHECK(contains(refusal(R"({"order_id":7,"total_cents":4200,"currency":"EUR"})"), "'customer' is missing"));
  CHECK(contains(refusal(R"({"order_id":7,"total_cents":4200,"currency":"EUR","customer":{"id":""}})"),
                 "'customer.id' must be 1-200 bytes"));
  CHECK(contains(refusal(order("-1")), "not invoiced, not charged"));
}

TEST_CASE("an order with a negative, zero or absurd amount is dead-lettered without an invoice or a charge") {
  BillingFixture f(/*unique_order_key=*/true);
  billing::InvoiceHandler handler({f.s(), InvoiceStrategy::kNaturalKey, true}, f.gateway);
  outbox::ConsumerRunner runner(f.options(Deduplication::kInbox), std::ref(handler));
  f.start(runner);
  const std::vector<std::string> bad = {
      billing::order_placed_json(2001, -99999999), billing::order_placed_json(2002, 0),
      billing::order_placed_json(2003, 1'000'000'000'000),
      R"({"order_id":2004,"total_cents":42.5,"currency":"EUR","customer":{"id":"c-1"}})",
      R"({"order_id":2005,"total_cents":4200,"currency":"XXX","customer":{"id":"c-1"}})"};
  for (const auto& body : bad) f.publish("OrderPlaced", body, MessageId::generate_v7().to_string());
  f.publish_order(2006, MessageId::generate_v7().to_string());  // a good one still goes through

  REQUIRE(testenv::eventually(20s, [&] {
    return runner.counters().dead_lettered >= bad.size() && runner.counters().processed >= 1;
  }));
  CHECK(testenv::eventually(10s,
                            [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == bad.size(); }));
  runner.stop();
  runner.wait();
  CHECK(runner.counters().dead_lettered == bad.size());
  CHECK(f.gateway.charges_taken() == 1);
  CHECK(f.invoices() == 1);
  CHECK(testenv::sql_value("SELECT order_id FROM " + f.s() + ".invoices") == "2006");
}
