// Validation of the consumer SDK's settings: bad input is refused with the field
// and the value at fault, before anything connects.

#include <doctest/doctest.h>

#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/inbox.h"
#include "outbox/inbox_retention.h"
#include "outbox/natural_key_insert.h"
#include "outbox/state_transition.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;

outbox::RunnerOptions valid_options() {
  outbox::RunnerOptions o;
  o.pg_dsn = "host=127.0.0.1";
  o.amqp_uri = "amqp://guest:guest@127.0.0.1:5672/%2f";
  o.consumer = outbox::ConsumerName("billing");
  o.queue = "billing.order-placed";
  o.bindings = {{"orders", "order.placed"}};
  o.dead_letter_exchange = "billing.dlx";
  return o;
}

// The ValidationError thrown by `f`, so its field and text can be checked.
template <class F>
outbox::ValidationError validation_error(F f) {
  try {
    f();
  } catch (const outbox::ValidationError& e) {
    return e;
  }
  FAIL_CHECK("no ValidationError thrown");  // not fatal: every case of a table reports
  return outbox::ValidationError("", "");
}

}  // namespace

TEST_CASE("a retention shorter than the redelivery horizon is refused, naming both") {
  outbox::RetentionPolicy p;
  p.retention = std::chrono::hours(24);
  p.redelivery_horizon = std::chrono::hours(24 * 14);
  auto e = validation_error([&] { outbox::InboxRetention("outbox", p); });
  CHECK(e.field() == "retention");
  CHECK(std::string(e.what()).find("1d is shorter than the redelivery horizon 14d") != std::string::npos);
  p.retention = p.redelivery_horizon;
  CHECK_NOTHROW(outbox::InboxRetention("outbox", p));
  p.batch_size = 0;
  CHECK(validation_error([&] { outbox::InboxRetention("outbox", p); }).field() == "batch_size");
}

TEST_CASE("a runner refuses a retention shorter than its redelivery horizon") {
  auto o = valid_options();
  o.retention = outbox::RetentionPolicy{std::chrono::hours(1), std::chrono::hours(2), 1000};
  CHECK(validation_error([&] { validate_runner_options(o); }).field() == "retention");
}

TEST_CASE("a late delivery is one older than the retention") {
  outbox::InboxRetention retention("outbox", {std::chrono::hours(48), std::chrono::hours(24), 1000});
  auto now = std::chrono::system_clock::now();
  CHECK_FALSE(retention.is_late(now - std::chrono::hours(47), now));
  CHECK(retention.is_late(now - std::chrono::hours(49), now));
}

TEST_CASE("consumer names are checked before they reach logs or SQL") {
  CHECK_NOTHROW(outbox::validate_consumer_name(outbox::ConsumerName("billing.v2:eu-1")));
  for (const char* bad : {"", "bill ing", "billing\nERROR forged", "naïve"}) {
    auto e = validation_error([&] { outbox::Inbox({"outbox", outbox::ConsumerName(bad)}); });
    CHECK(e.field() == "consumer");
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
  // Quoted as every error quotes a caller's value (and inbox_record() in SQL): a
  // bidi override or a C1 control would reorder or drive the terminal showing the log.
  const auto e = validation_error([] {
    outbox::validate_consumer_name(outbox::ConsumerName("bill\u202eing\xc2\x9b"));
  });
  CHECK(std::string(e.what()).find("'bill\\xe2\\x80\\xaeing\\xc2\\x9b' is not a consumer name") != std::string::npos);
  // A long one shows its size, as inbox_record() does (sql_contract_pgtest), not 80 bytes and "...".
  const auto long_name = validation_error([] {
    outbox::validate_consumer_name(outbox::ConsumerName(std::string(300, 'b')));
  });
  CHECK_MESSAGE(std::string(long_name.what()).find("(300 bytes)") != std::string::npos, long_name.what());
  CHECK(validation_error([] {
          outbox::Inbox({"Robert'); DROP", outbox::ConsumerName("billing")});
        }).field() == "schema");
}

TEST_CASE("runner options name the field at fault") {
  CHECK_NOTHROW(validate_runner_options(valid_options()));
  struct Case {
    const char* field;
    void (*spoil)(outbox::RunnerOptions&);
  };
  const Case cases[] = {
      {"pg_dsn", [](outbox::RunnerOptions& o) { o.pg_dsn.clear(); }},
      {"amqp_uri", [](outbox::RunnerOptions& o) { o.amqp_uri.clear(); }},
      {"queue", [](outbox::RunnerOptions& o) { o.queue.clear(); }},
      {"dead_letter_exchange", [](outbox::RunnerOptions& o) { o.dead_letter_exchange.clear(); }},
      {"consumer", [](outbox::RunnerOptions& o) { o.consumer = outbox::ConsumerName(""); }},
      {"schema", [](outbox::RunnerOptions& o) { o.schema = "a-b"; }},
      {"concurrency", [](outbox::RunnerOptions& o) { o.concurrency = 0; }},
      {"prefetch", [](outbox::RunnerOptions& o) { o.prefetch = 0; }},
      {"max_attempts", [](outbox::RunnerOptions& o) { o.max_attempts = 0; }},
      {"retry_delay_max_ms", [](outbox::RunnerOptions& o) { o.retry_delay_max = o.retry_delay - 1ms; }},
      {"retry_order", [](outbox::RunnerOptions& o) { o.retry_order = outbox::RetryOrder::kSetAside; }},  // prefetch 1
      {"bindings[0].exchange", [](outbox::RunnerOptions& o) { o.bindings[0].exchange.clear(); }},
      {"bindings[0].exchange_type", [](outbox::RunnerOptions& o) { o.bindings[0].exchange_type = "x-custom"; }},
      // Otherwise found only at start(), as an AmqpError, after the runner was built:
      {"amqp_uri", [](outbox::RunnerOptions& o) { o.amqp_uri = "amqp://guest:Pw-Secret@127.0.0.1:56x72/%2f"; }},
      {"amqp_uris[1]",
       [](outbox::RunnerOptions& o) {
         o.amqp_uris = {o.amqp_uri, "amqp://guest:Pw-Secret@[127.0.0.1/%2f"};
         o.amqp_uri.clear();
       }},
      {"bindings[0].routing_key", [](outbox::RunnerOptions& o) { o.bindings[0].routing_key = std::string(256, 'r'); }},
      {"dead_letter_queue", [](outbox::RunnerOptions& o) { o.queue = std::string(250, 'q'); }},  // + ".dead-letter"
  };
  for (const auto& c : cases) {
    auto o = valid_options();
    c.spoil(o);
    const std::string field = c.field;
    CAPTURE(field);
    const auto e = validation_error([&] { validate_runner_options(o); });
    CHECK(e.field() == c.field);
    CHECK(std::string(e.what()).find("Secret") == std::string::npos);  // no URI, no password
  }
  auto o = valid_options();
  o.concurrency = 300;
  CHECK(std::string(validation_error([&] { validate_runner_options(o); }).what()) ==
        "concurrency: 300 is outside 1-256");
}

TEST_CASE("TLS files need an amqps:// URI, and a client certificate its key; neither error shows the URI") {
  auto o = valid_options();
  o.amqp_uri = "amqps://billing:hunter2@mq.internal/prod";
  o.amqp_ca_file = "/etc/outbox/ca.crt";
  o.amqp_cert_file = "/etc/outbox/client.crt";
  o.amqp_key_file = "/etc/outbox/client.key";
  o.amqp_verify_hostname = false;
  CHECK_NOTHROW(validate_runner_options(o));

  auto plain = o;
  plain.amqp_uri = "amqp://billing:hunter2@mq.internal/prod";
  auto e = validation_error([&] { validate_runner_options(plain); });
  CHECK(e.field() == "amqp_uri");
  CHECK(std::string(e.what()).find("need an amqps:// URI") != std::string::npos);
  CHECK(std::string(e.what()).find("hunter2") == std::string::npos);

  auto no_key = o;
  no_key.amqp_key_file.clear();
  CHECK(validation_error([&] { validate_runner_options(no_key); }).field() == "amqp_cert_file");
  auto no_cert = o;
  no_cert.amqp_cert_file.clear();
  CHECK(validation_error([&] { validate_runner_options(no_cert); }).field() == "amqp_key_file");

  auto other = o;
  other.amqp_uri = "http://billing:hunter2@mq.internal/";
  e = validation_error([&] { validate_runner_options(other); });
  CHECK(e.field() == "amqp_uri");
  CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
}

TEST_CASE("a runner without a handler is refused") {
  CHECK(validation_error([] { outbox::ConsumerRunner(valid_options(), nullptr); }).field() == "handler");
}

TEST_CASE("idempotent-write helpers refuse names that are not plain identifiers") {
  CHECK(validation_error([] { outbox::NaturalKeyInsert("shop", "invoices;--", {"order_id"}, {"order_id"}); }).field() ==
        "table");
  CHECK(validation_error([] { outbox::NaturalKeyInsert("shop", "invoices", {"order_id"}, {"customer"}); }).field() ==
        "key_columns");
  CHECK(validation_error([] { outbox::StateTransition("shop", "payments", "id", "state\""); }).field() ==
        "state_column");
  outbox::NaturalKeyInsert insert("shop", "invoices", {"order_id", "amount"}, {"order_id"});
  CHECK(insert.sql() ==
        "INSERT INTO \"shop\".\"invoices\" (\"order_id\", \"amount\") VALUES ($1, $2) "
        "ON CONFLICT (\"order_id\") DO NOTHING");
}

TEST_CASE("a pg_dsn libpq cannot parse is refused naming pg_dsn and none of its password") {
  const std::string pw = "Zq7@x:TOPSECRETPART/9";
  for (const auto& dsn : {"postgresql://billing:" + pw + "@127.0.0.1:5432/app", "host=127.0.0.1 password='" + pw}) {
    CAPTURE(dsn);
    auto o = valid_options();
    o.pg_dsn = dsn;
    auto e = validation_error([&] { outbox::validate_runner_options(o); });
    CHECK(e.field() == "pg_dsn");
    CHECK_MESSAGE(testenv::leaked_fragment(e.what(), pw).empty(), e.what());
  }
}
