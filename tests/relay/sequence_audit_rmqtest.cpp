// outbox-relay sequence-audit against the whole path: the SDK enqueues keyed events,
// the relay publishes them, a consumer with a sequence guard applies them; an
// operator purges a queue holding one event, and the audit names that key.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "amqp_test_client.h"
#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sequence_guard.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

namespace {

using namespace std::chrono_literals;
using testenv::contains;

struct Fixture {
  testenv::ScopedSchema schema{"seqaudit"};
  testenv::ConsumerTopology topology{"seqaudit"};
  std::string consumer = testenv::unique_name("billing");
  std::string config = testenv::write_temp_file(testenv::relay_config_yaml(schema.name()));

  Fixture() { testenv::sql_exec("CREATE TABLE " + schema.name() + ".applied (key text, seq bigint)"); }

  outbox::RunnerOptions options() const {
    auto o = topology.options(schema.name(), consumer);
    o.sequence_guard = true;
    return o;
  }
  void handle(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
    auto ks = outbox::key_sequence_of(d);
    outbox::pgx::exec_params(tx, "INSERT INTO " + schema.name() + ".applied VALUES ($1, $2)", ks->key, ks->seq);
  }
  // Enqueues one event per key in one transaction, then lets the relay publish it.
  void enqueue_and_relay(const std::vector<std::string>& keys) {
    outbox::OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    for (const auto& key : keys) {
      outbox::Message m;
      m.exchange = outbox::Exchange(topology.exchange);
      m.routing_key = outbox::RoutingKey(topology.routing_key);
      m.type = outbox::MessageType("InvoiceDue");
      m.ordering_key = key;
      m.payload = "{}";
      writer.enqueue(tx, m);
    }
    tx.commit();
    testenv::RelayProcess relay(testenv::relay_config_yaml(schema.name()), /*exit_when_idle=*/true);
    REQUIRE(relay.wait() == 0);
  }
  int applied() const { return std::stoi(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".applied")); }
  testenv::CommandResult audit(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"sequence-audit", "--config", config, "--consumer", consumer};
    args.insert(args.end(), extra.begin(), extra.end());
    return testenv::run_relay_command(args);
  }
};

}  // namespace

TEST_CASE("sequence-audit reports an event purged from the queue as a gap on its key, and nothing else") {
  Fixture f;
  auto handler = [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.handle(tx, d); };
  {
    outbox::ConsumerRunner runner(f.options(), handler);
    runner.start();
    f.enqueue_and_relay({"order-1", "order-2"});
    REQUIRE(testenv::eventually(10s, [&] { return f.applied() == 2; }));
    runner.stop();
    runner.wait();
  }
  auto ok = f.audit();
  CHECK_MESSAGE(ok.exit_code == 0, ok.output);
  CHECK_MESSAGE(contains(ok.output, "2 key(s) in the outbox, 2 in step, 0 not"), ok.output);

  // order-1's second event is published while the consumer is away, and purged.
  f.enqueue_and_relay({"order-1"});
  testenv::AmqpTestClient admin(testenv::shared_amqp_endpoint(), "purger");
  amqp_queue_purge(admin.conn(), 1, testenv::amqp_bytes_of(f.topology.queue));
  admin.check("queue.purge");
  // Its third arrives when the consumer is back: held, never applied past the gap.
  f.enqueue_and_relay({"order-1", "order-2"});
  outbox::ConsumerRunner runner(f.options(), handler);
  runner.start();
  REQUIRE(testenv::eventually(10s, [&] { return f.applied() == 3; }));  // order-2's second
  std::this_thread::sleep_for(1100ms);                                  // past --grace 1s

  auto r = f.audit({"--grace", "1s", "--json"});
  CHECK_MESSAGE(r.exit_code == 3, r.output);
  auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  CHECK(j["keys"] == 2);
  CHECK(j["in_step"] == 1);
  CHECK(j["past_grace"] == 1);
  REQUIRE(j["listed"].size() == 1);
  const auto& k = j["listed"][0];
  CHECK(k["key"] == "order-1");
  CHECK(k["committed"] == 3);
  CHECK(k["applied"] == 1);
  CHECK(k["behind"] == 2);
  CHECK(k["held"] == 1);  // sequence 3 waits for the purged 2
  CHECK(k["held_for_s"].get<double>() > 0.5);

  auto text = f.audit({"--grace", "1s"});
  CHECK(text.exit_code == 3);
  CHECK_MESSAGE(contains(text.output, "order-1"), text.output);
  CHECK_MESSAGE(contains(text.output, ", held "), text.output);
  // Within a longer grace the same key may still be in flight: listed, exit 0.
  auto lenient = f.audit({"--grace", "1h"});
  CHECK_MESSAGE(lenient.exit_code == 0, lenient.output);
  CHECK_MESSAGE(contains(lenient.output, "(in flight?)"), lenient.output);
}

TEST_CASE("sequence-audit refuses a bad consumer name, grace or DSN file, naming the flag") {
  Fixture f;
  auto bad_name = testenv::run_relay_command({"sequence-audit", "--config", f.config, "--consumer", "bill ing"});
  CHECK(bad_name.exit_code == 2);
  CHECK_MESSAGE(contains(bad_name.output, "--consumer: 'bill ing' is not a consumer name"), bad_name.output);
  auto bad_grace = f.audit({"--grace", "soon"});
  CHECK(bad_grace.exit_code == 2);
  CHECK_MESSAGE(contains(bad_grace.output, "--grace"), bad_grace.output);
  auto no_file = f.audit({"--consumer-dsn-file", "/nonexistent/dsn"});
  CHECK(no_file.exit_code == 2);
  CHECK_MESSAGE(contains(no_file.output, "--consumer-dsn-file: cannot read '/nonexistent/dsn'"), no_file.output);
  auto missing = testenv::run_relay_command({"sequence-audit", "--config", f.config});
  CHECK(missing.exit_code == 2);
  CHECK_MESSAGE(contains(missing.output, "needs --consumer NAME"), missing.output);
}

TEST_CASE("sequence-audit reads the consumer's database from a DSN file and never prints its password") {
  Fixture f;
  // A login of its own with a password, for the consumer side.
  const std::string login = testenv::unique_name("auditor");
  const std::string password = "s3cr3t-'quoted\"-pw";
  testenv::sql_exec("CREATE ROLE " + login + " LOGIN PASSWORD 's3cr3t-''quoted\"-pw'");
  testenv::sql_exec("GRANT USAGE ON SCHEMA " + f.schema.name() + " TO " + login);
  testenv::sql_exec("GRANT SELECT ON " + f.schema.name() + ".inbox_key_sequences, " + f.schema.name() +
                    ".inbox_held TO " + login);
  auto dsn = testenv::pg_dsn() + " user=" + login + " password=" + testenv::single_quoted(password);
  auto file = testenv::write_temp_file(dsn, ".dsn");
  auto r = f.audit({"--consumer-dsn-file", file});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  // An unreachable consumer database fails with exit 1 and no byte of the password.
  auto wrong = testenv::write_temp_file("host=127.0.0.1 port=1 user=" + login + " password='Wr0ngPassw0rd'", ".dsn");
  auto failed = f.audit({"--consumer-dsn-file", wrong});
  CHECK_MESSAGE(failed.exit_code == 1, failed.output);
  CHECK(testenv::leaked_fragment(failed.output, "Wr0ngPassw0rd").empty());
  CHECK(testenv::leaked_fragment(r.output, password).empty());
  testenv::sql_exec("DROP OWNED BY " + login);
  testenv::sql_exec("DROP ROLE " + login);
}
