// ConsumerRunner against the real RabbitMQ and PostgreSQL: ack after commit,
// duplicates, retries, dead letters, the consumer outbox, shutdown.

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/outbox_writer.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pqxx_compat.h"
#include "tcp_proxy.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;
using outbox::MessageId;

// A schema with an effects table: one row per committed handler run.
struct Fixture {
  testenv::ScopedSchema schema{"runner"};
  testenv::ConsumerTopology topology{"runner"};
  testenv::TestPublisher publisher;

  Fixture() { testenv::sql_exec("CREATE TABLE " + s() + ".effects (message_id uuid NOT NULL, body text)"); }
  const std::string& s() const { return schema.name(); }

  outbox::RunnerOptions options(int concurrency = 1) const {
    return topology.options(s(), testenv::unique_name("consumer"), concurrency);
  }
  std::string publish(const std::string& body, std::optional<std::string> id = MessageId::generate_v7().to_string()) {
    testenv::TestPublisher::Options o;
    o.message_id = id;
    publisher.publish(topology.exchange, topology.routing_key, body, o);
    return id.value_or("");
  }
  void record_effect(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
    outbox::pgx::exec_params(tx, "INSERT INTO " + s() + ".effects VALUES ($1::uuid, $2)", d.message_id.to_string(),
                             d.body);
  }
  int effects() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + s() + ".effects")); }
  int inbox_rows() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + s() + ".inbox")); }
};

class InjectedPermanent : public outbox::PermanentError {
 public:
  InjectedPermanent() : outbox::PermanentError("payload breaks the event schema") {}
};

}  // namespace

TEST_CASE("each message is handled once, committed, then acked") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(2),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.record_effect(tx, d); });
  runner.start();
  for (int i = 0; i < 5; ++i) f.publish("{\"n\":" + std::to_string(i) + "}");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 5; }));
  runner.stop();
  runner.wait();
  CHECK(f.effects() == 5);
  CHECK(f.inbox_rows() == 5);
  CHECK(runner.counters().duplicates == 0);
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);  // acked: nothing came back on close
}

TEST_CASE("a redelivered message is acked as a duplicate without a second effect") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.record_effect(tx, d); });
  runner.start();
  auto id = f.publish("first");
  f.publish("again", id);
  f.publish("other");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed + runner.counters().duplicates == 3; }));
  runner.stop();
  runner.wait();
  CHECK(runner.counters().processed == 2);
  CHECK(runner.counters().duplicates == 1);
  CHECK(f.effects() == 2);
  CHECK(testenv::sql_value("SELECT body FROM " + f.s() + ".effects WHERE message_id = '" + id + "'") == "first");
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("a failing handler is retried, its failed tries rolled back, until it succeeds") {
  Fixture f;
  std::mutex m;
  std::vector<int> attempts;
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);  // written before the failure: must vanish with the rollback
    std::lock_guard lock(m);
    attempts.push_back(d.attempt);
    if (attempts.size() < 3) throw std::runtime_error("gateway timeout");
  });
  runner.start();
  f.publish("x");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();
  CHECK(attempts == std::vector<int>{1, 2, 3});
  CHECK(runner.counters().failed == 2);
  CHECK(runner.counters().retried == 2);
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(f.effects() == 1);
  CHECK(f.inbox_rows() == 1);
}

TEST_CASE("a handler that keeps failing is dead-lettered after max_attempts") {
  Fixture f;
  auto options = f.options();
  options.max_attempts = 3;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);
    ++calls;
    throw std::runtime_error("always broken");
  });
  runner.start();
  f.publish("poison");
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 3);
  CHECK(runner.counters().failed == 3);
  CHECK(runner.counters().retried == 2);
  CHECK(runner.counters().dead_lettered == 1);
  CHECK(f.effects() == 0);
  CHECK(f.inbox_rows() == 0);  // a replay from the dead-letter queue will be processed
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("a PermanentError is dead-lettered on the first try") {
  Fixture f;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base&, const outbox::Delivery&) {
    ++calls;
    throw InjectedPermanent();
  });
  runner.start();
  f.publish("undecryptable");
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 1);
  CHECK(runner.counters().retried == 0);
  CHECK(runner.counters().dead_lettered == 1);
}

TEST_CASE("a message without a valid message id is dead-lettered unprocessed") {
  Fixture f;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base&, const outbox::Delivery&) { ++calls; });
  runner.start();
  f.publish("no id", std::nullopt);
  f.publish("bad id", std::string("order-42"));
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 2; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 0);
  CHECK(runner.counters().dead_lettered == 2);
}

TEST_CASE("messages a foreign producer stamps with the nil UUID are dead-lettered, never acked as duplicates") {
  Fixture f;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base&, const outbox::Delivery&) { ++calls; });
  runner.start();
  const std::string nil = "00000000-0000-0000-0000-000000000000";
  f.publish("first charge", nil);
  f.publish("second charge", nil);
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 2; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 0);
  CHECK(runner.counters().duplicates == 0);
  CHECK(runner.counters().dead_lettered == 2);
  CHECK(f.inbox_rows() == 0);
}

TEST_CASE("follow-up events enqueued by a handler commit with its inbox record and effect, or not at all") {
  Fixture f;
  outbox::OutboxWriter writer({f.s(), {}});
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);
    outbox::Message invoiced;
    invoiced.exchange = outbox::Exchange("billing");
    invoiced.routing_key = outbox::RoutingKey("invoice.created");
    invoiced.type = outbox::MessageType("InvoiceCreated");
    invoiced.correlation_id = d.message_id.to_string();
    invoiced.payload = d.body;
    writer.enqueue(tx, invoiced);
    if (d.body == "fails after enqueue") throw InjectedPermanent();
  });
  runner.start();
  auto good = f.publish("ok");
  auto bad = f.publish("fails after enqueue");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed + runner.counters().dead_lettered == 2; }));
  runner.stop();
  runner.wait();
  CHECK(testenv::sql_value("SELECT count(*) FROM " + f.s() + ".outbox") == "1");
  CHECK(testenv::sql_value("SELECT correlation_id FROM " + f.s() + ".outbox") == good);
  CHECK(testenv::sql_value("SELECT count(*) FROM " + f.s() + ".inbox WHERE message_id = '" + bad + "'") == "0");
  CHECK(f.effects() == 1);
}

TEST_CASE("a commit that fails is retried: the message is neither lost nor applied twice") {
  Fixture f;
  // A deferred constraint trigger fails the first COMMIT that wrote an effect; a
  // sequence counts across the rollback.
  testenv::sql_exec("CREATE SEQUENCE " + f.s() + ".commits");
  testenv::sql_exec("CREATE FUNCTION " + f.s() +
                    ".fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "IF nextval('" +
                    f.s() +
                    ".commits') = 1 THEN RAISE EXCEPTION 'injected commit failure'; END IF; "
                    "RETURN NULL; END $$");
  testenv::sql_exec("CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON " + f.s() +
                    ".effects DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + f.s() +
                    ".fail_first_commit()");
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    ++calls;
    f.record_effect(tx, d);
  });
  runner.start();
  f.publish("x");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 2);
  CHECK(runner.counters().failed == 1);
  CHECK(f.effects() == 1);
  CHECK(f.inbox_rows() == 1);
}

TEST_CASE("a lost PostgreSQL connection requeues the message without counting a try") {
  Fixture f;
  auto options = f.options();
  options.max_attempts = 1;  // a counted try would dead-letter the message
  std::atomic<int> backend_pid{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    backend_pid = outbox::pgx::exec1(tx, "SELECT pg_backend_pid()")[0].as<int>();
    f.record_effect(tx, d);
  });
  runner.start();
  f.publish("first");
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  testenv::sql_exec("SELECT pg_terminate_backend(" + std::to_string(backend_pid.load()) + ")");
  f.publish("second");
  REQUIRE(testenv::eventually(15s, [&] { return runner.counters().processed == 2; }));
  runner.stop();
  runner.wait();
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(runner.counters().failed == 1);
  CHECK(runner.counters().retried == 1);
  CHECK(f.effects() == 2);
}

TEST_CASE(
    "a handler slower than idle_in_transaction_session_timeout is a counted try, dead-lettered after max_attempts") {
  // The server closes such a session itself (SQLSTATE 25P03): were that taken for an
  // outage, the handler, and any outside effect it has, would be rerun forever.
  Fixture f;
  auto options = f.options();
  auto dsn = outbox::PgConnInfo::parse(options.pg_dsn);
  dsn.set("options", "-c idle_in_transaction_session_timeout=200");
  options.pg_dsn = dsn.to_string();
  options.max_attempts = 2;
  bool query_after = true;
  SUBCASE("the handler's next statement finds the session closed") { query_after = true; }
  SUBCASE("the commit finds the session closed") { query_after = false; }
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    ++calls;
    f.record_effect(tx, d);
    std::this_thread::sleep_for(400ms);  // the gateway call, with the transaction idle
    if (query_after) tx.exec("SELECT 1");
  });
  runner.start();
  f.publish("slow");
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 2);
  CHECK(runner.counters().dead_lettered == 1);
  CHECK(runner.counters().retried == 1);
  CHECK(f.effects() == 0);
  CHECK(f.inbox_rows() == 0);
}

TEST_CASE("SIGTERM lets the in-flight message commit and be acked; the rest stay queued") {
  Fixture f;
  std::promise<void> started;
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(f.options(), [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    if (++calls == 1) started.set_value();
    std::this_thread::sleep_for(300ms);  // still running when SIGTERM arrives
    f.record_effect(tx, d);
  });
  auto result = std::async(std::launch::async, [&] { return runner.run_until_signal(); });
  struct StopOnExit {  // a failed REQUIRE must not leave the future waiting forever
    outbox::ConsumerRunner& r;
    ~StopOnExit() { r.stop(); }
  } stop_on_exit{runner};
  REQUIRE(testenv::eventually(10s, [&] { return testenv::consumer_count(f.topology.queue) == 1; }));
  for (int i = 0; i < 3; ++i) f.publish("m" + std::to_string(i));
  started.get_future().wait();
  REQUIRE(kill(getpid(), SIGTERM) == 0);
  REQUIRE(result.wait_for(10s) == std::future_status::ready);
  CHECK(result.get() == SIGTERM);
  CHECK(calls == 1);
  CHECK(runner.counters().processed == 1);
  CHECK(f.effects() == 1);
  CHECK(testenv::queue_state(f.topology.queue).ready == 2);
}

TEST_CASE("a message older than the inbox retention is counted as a late delivery and still processed") {
  Fixture f;
  auto options = f.options();
  options.retention = outbox::RetentionPolicy{std::chrono::hours(1), std::chrono::hours(1), 1000};
  outbox::ConsumerRunner runner(options,
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.record_effect(tx, d); });
  runner.start();
  auto now_s = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  testenv::TestPublisher::Options late, fresh;
  late.message_id = MessageId::generate_v7().to_string();
  late.timestamp_unix_s = now_s - 2 * 3600;
  fresh.message_id = MessageId::generate_v7().to_string();
  fresh.timestamp_unix_s = now_s;
  f.publisher.publish(f.topology.exchange, f.topology.routing_key, "late", late);
  f.publisher.publish(f.topology.exchange, f.topology.routing_key, "fresh", fresh);
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 2; }));
  CHECK(runner.counters().late_deliveries == 1);
}

TEST_CASE("a queue that exists without the dead-letter exchange stops the runner from starting") {
  Fixture f;
  testenv::declare_plain_queue(f.topology.queue);
  outbox::ConsumerRunner runner(f.options(), [](pqxx::transaction_base&, const outbox::Delivery&) {});
  try {
    runner.start();
    FAIL("start() succeeded on a conflicting queue");
  } catch (const std::exception& e) {
    std::string what = e.what();
    CHECK(what.find(f.topology.queue) != std::string::npos);
    CHECK(what.find("PRECONDITION_FAILED") != std::string::npos);
    CHECK(what.find("guest") == std::string::npos);  // no credentials in the error
  }
}

TEST_CASE("a message whose ack is lost with the connection comes back and is skipped as a duplicate") {
  Fixture f;
  // The runner reaches RabbitMQ through a proxy the handler cuts after its effect:
  // the commit succeeds, the ack cannot reach the broker, which requeues the message.
  std::string uri = testenv::amqp_uri();
  auto at = uri.rfind('@'), colon = uri.find(':', at), slash = uri.find('/', at);
  REQUIRE((at != std::string::npos && colon != std::string::npos && slash != std::string::npos));
  testenv::TcpProxy proxy(uri.substr(at + 1, colon - at - 1),
                          static_cast<std::uint16_t>(std::stoi(uri.substr(colon + 1, slash - colon - 1))));
  auto options = f.options();
  options.amqp_uri = uri.substr(0, colon + 1) + std::to_string(proxy.port()) + uri.substr(slash);
  std::atomic<int> calls{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);
    if (++calls == 1) proxy.cut_all();
  });
  runner.start();
  f.publish("first");
  REQUIRE(testenv::eventually(15s, [&] { return runner.counters().duplicates == 1; }));
  f.publish("after the reconnect");
  REQUIRE(testenv::eventually(10s, [&] { return f.effects() == 2; }));
  runner.stop();
  runner.wait();
  CHECK(calls == 2);  // the redelivery never reached the handler
  CHECK(f.effects() == 2);
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("a PostgreSQL connection that fails names the server but never a byte of pg_dsn's password") {
  Fixture f;
  const std::string pw = "Zq7@:/TOPSECRETPART%?#Wx";
  auto server = outbox::PgConnInfo::parse(testenv::pg_dsn());
  const std::string real_host = server.get("host").value_or("127.0.0.1"),
                    real_port = server.get("port").value_or("5432");
  for (const auto& dsn : {// libpq quotes an unresolvable host name in its error: here it holds the password
                          "host=TOPSECRETPART.invalid connect_timeout=2 user=billing password='" + pw + "'",
                          // the real server refusing the login of a role that does not exist
                          "postgresql://" + testenv::unique_name("nosuch_role") + ":" + testenv::percent_encoded(pw) +
                              "@" + real_host + ":" + real_port + "/postgres?connect_timeout=2"}) {
    CAPTURE(dsn);
    auto options = f.options();
    options.pg_dsn = dsn;
    outbox::ConsumerRunner runner(options, [](pqxx::transaction_base&, const outbox::Delivery&) {});
    std::string error;
    try {
      runner.start();
    } catch (const std::exception& e) {
      error = e.what();
    }
    CHECK_FALSE(error.empty());  // the failure is reported
    CHECK_MESSAGE(testenv::leaked_fragment(error, pw).empty(), error);
  }
}

// RetryOrder::kSetAside: a failing message waits for its retry beside the worker, not in it.
TEST_CASE("with kSetAside a message that keeps failing does not hold back the messages behind it") {
  Fixture f;
  auto options = f.options();
  options.prefetch = 10;
  options.retry_order = outbox::RetryOrder::kSetAside;
  options.max_attempts = 4;
  options.retry_delay = 400ms;  // waits of 400 + 800 + 1 600 ms before it is dead-lettered
  options.retry_delay_max = 2000ms;
  std::atomic<int> poison_calls{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    if (d.body == "poison") {
      ++poison_calls;
      throw std::runtime_error("always broken");
    }
    f.record_effect(tx, d);
  });
  runner.start();
  f.publish("poison");
  for (int i = 0; i < 20; ++i) f.publish("good" + std::to_string(i));
  // Held in its worker, the poison message would keep the 20 behind it waiting 2.8 s.
  CHECK(testenv::eventually(1500ms, [&] { return f.effects() == 20; }));
  CHECK(poison_calls < 3);  // still waiting for its later tries meanwhile
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  runner.stop();
  runner.wait();
  CHECK(poison_calls == 4);
  CHECK(runner.counters().processed == 20);
  CHECK(runner.counters().retried == 3);
  CHECK(runner.counters().dead_lettered == 1);
  CHECK(f.effects() == 20);
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("with kSetAside a message that succeeds on a later try is processed once, its failed tries rolled back") {
  Fixture f;
  auto options = f.options();
  options.prefetch = 5;
  options.retry_order = outbox::RetryOrder::kSetAside;
  options.retry_delay = 200ms;
  options.retry_delay_max = 200ms;
  std::mutex m;
  std::vector<std::string> committed_order;
  int flaky_tries = 0;
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    f.record_effect(tx, d);  // written before the failure: must vanish with the rollback
    std::lock_guard lock(m);
    if (d.body == "flaky" && ++flaky_tries < 3) throw std::runtime_error("gateway timeout");
    committed_order.push_back(d.body);
  });
  runner.start();
  f.publish("flaky");
  for (int i = 0; i < 3; ++i) f.publish("m" + std::to_string(i));
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 4; }));
  runner.stop();
  runner.wait();
  CHECK(committed_order == std::vector<std::string>{"m0", "m1", "m2", "flaky"});
  CHECK(flaky_tries == 3);
  CHECK(f.effects() == 4);
  CHECK(f.inbox_rows() == 4);
  CHECK(runner.counters().dead_lettered == 0);
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("with kSetAside a stop requeues the messages set aside at once: none is lost or waited for") {
  Fixture f;
  auto options = f.options();
  options.prefetch = 5;
  options.retry_order = outbox::RetryOrder::kSetAside;
  options.retry_delay = 30000ms;
  options.retry_delay_max = 30000ms;
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base&, const outbox::Delivery&) {
    throw std::runtime_error("downstream refuses");
  });
  runner.start();
  for (int i = 0; i < 3; ++i) f.publish("m" + std::to_string(i));
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().retried == 3; }));  // all three set aside
  const std::string gauge = "outbox_consumer_set_aside{consumer=\"" + options.consumer.value() + "\"} ";
  CHECK_MESSAGE(runner.metrics().render().find(gauge + "3\n") != std::string::npos, runner.metrics().render());
  const auto t0 = std::chrono::steady_clock::now();
  runner.stop();
  runner.wait();
  CHECK(runner.metrics().render().find(gauge + "0\n") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);  // not the 30 s of their waits
  REQUIRE(testenv::eventually(5s, [&] { return testenv::queue_state(f.topology.queue).ready == 3; }));
  CHECK(testenv::queue_state(f.topology.dead_letter_queue).ready == 0);
  CHECK(f.effects() == 0);
}
