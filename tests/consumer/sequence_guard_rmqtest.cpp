// The sequence guard (RunnerOptions::sequence_guard, migration 0017) against the real
// RabbitMQ and PostgreSQL: each key's events applied once and in order whatever
// order they arrive in, early ones held in the consumer's database, gaps reported,
// a malformed or gone-back sequence dead-lettered rather than applied or skipped.

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <vector>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sequence_guard.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;
using outbox::MessageId;

struct Fixture {
  testenv::ScopedSchema schema{"seqguard"};
  testenv::ConsumerTopology topology{"seqguard"};
  testenv::TestPublisher publisher;
  std::string consumer = testenv::unique_name("ledger");

  Fixture() {
    testenv::sql_exec("CREATE TABLE " + s() + ".applied (n bigserial, key text, seq bigint, message_id uuid)");
  }
  const std::string& s() const { return schema.name(); }

  outbox::RunnerOptions options(int concurrency = 1) const {
    auto o = topology.options(s(), consumer, concurrency);
    o.sequence_guard = true;
    o.sequence_gap_alert = 300ms;
    return o;
  }
  // The handler's effect: a row per applied event, in the order applied.
  void apply(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
    auto ks = outbox::key_sequence_of(d);
    outbox::pgx::exec_params(tx, "INSERT INTO " + s() + ".applied (key, seq, message_id) VALUES ($1, $2, $3::uuid)",
                             ks ? ks->key : std::string(), ks ? ks->seq : 0, d.message_id.to_string());
  }
  std::string publish(const std::string& key, std::int64_t seq, std::string id = MessageId::generate_v7().to_string()) {
    testenv::TestPublisher::Options o;
    o.message_id = id;
    o.headers = {{"x-outbox-key", key}};
    o.int_headers = {{"x-outbox-seq", seq}};
    publisher.publish(topology.exchange, topology.routing_key, "{}", o);
    return id;
  }
  // The sequences applied for `key`, in the order they were applied.
  std::vector<std::int64_t> applied(const std::string& key) const {
    pqxx::connection c(testenv::pg_dsn());
    pqxx::work tx(c);
    std::vector<std::int64_t> out;
    for (const auto& r :
         outbox::pgx::exec_params(tx, "SELECT seq FROM " + s() + ".applied WHERE key = $1 ORDER BY n", key))
      out.push_back(r[0].as<std::int64_t>());
    return out;
  }
  int count(const std::string& sql) const { return std::stoi(testenv::sql_value(sql)); }
  int held() const { return count("SELECT count(*) FROM " + s() + ".inbox_held"); }
};

std::vector<std::int64_t> one_to(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i + 1;
  return v;
}

}  // namespace

TEST_CASE("events that arrive out of order are applied in sequence order, each once") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  // Published before the runner consumes, so the queue's order is this order.
  runner.declare_topology();
  std::map<std::int64_t, std::string> ids;
  for (std::int64_t seq : {3, 1, 5, 2, 4}) ids[seq] = f.publish("order-1", seq);
  f.publish("order-1", 2, ids[2]);  // a redelivery of 2, after 2 came once
  runner.start();
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("order-1").size() == 5 && f.held() == 0; }));
  runner.stop();
  runner.wait();
  CHECK(f.applied("order-1") == one_to(5));
  CHECK(runner.counters().held == 2);  // 3 and 5 arrived early
  CHECK(runner.counters().processed == 5);
  CHECK(runner.counters().duplicates == 1);
  CHECK(f.count("SELECT last_seq FROM " + f.s() + ".inbox_key_sequences WHERE ordering_key = 'order-1'") == 5);
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
  CHECK(testenv::queue_state(f.topology.dead_letter_queue).ready == 0);
}

TEST_CASE("a missing event holds its key's later events, is reported, and releases them when it comes") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  runner.start();
  f.publish("acct-7", 1);
  f.publish("acct-7", 3);
  f.publish("acct-7", 4);
  f.publish("acct-8", 1);  // another key is not held up by acct-7's gap
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("acct-8").size() == 1; }));
  // Past the alert bound (300 ms) the status names the key and what it waits for.
  REQUIRE(testenv::eventually(15s, [&] { return runner.sequence_status().keys_gapped == 1; }));
  auto st = runner.sequence_status();
  CHECK_FALSE(st.healthy());
  CHECK(st.held == 2);
  REQUIRE(st.oldest.size() == 1);
  CHECK(st.oldest[0].key == "acct-7");
  CHECK(st.oldest[0].last_applied == 1);
  CHECK(st.oldest[0].next_held == 3);
  CHECK(st.oldest[0].waiting_s > 0.2);
  CHECK(runner.metrics().render().find("outbox_consumer_sequence_gaps{consumer=\"" + f.consumer + "\"} 1") !=
        std::string::npos);
  CHECK(f.applied("acct-7") == std::vector<std::int64_t>{1});  // 3 and 4 wait, acked off the broker
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);

  f.publish("acct-7", 2);
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("acct-7").size() == 4; }));
  CHECK(f.applied("acct-7") == one_to(4));
  CHECK(f.held() == 0);
  REQUIRE(testenv::eventually(15s, [&] {
    return runner.sequence_status().healthy() && runner.sequence_status().held == 0;
  }));
  CHECK(f.count("SELECT count(*) FROM " + f.s() + ".inbox_key_sequences WHERE gap_since IS NOT NULL") == 0);
}

TEST_CASE("held events survive a consumer restart and are applied by the next one") {
  Fixture f;
  auto handler = [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); };
  {
    outbox::ConsumerRunner first(f.options(), handler);
    first.start();
    f.publish("k", 2);
    f.publish("k", 3);
    REQUIRE(testenv::eventually(10s, [&] { return f.held() == 2; }));
    first.stop();
    first.wait();
  }
  // 1 is committed in the outbox and published while no consumer runs.
  f.publish("k", 1);
  outbox::ConsumerRunner second(f.options(), handler);
  second.start();
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("k").size() == 3; }));
  CHECK(f.applied("k") == one_to(3));
  CHECK(f.held() == 0);
}

TEST_CASE("several workers with a deep prefetch apply every key's events in order") {
  Fixture f;
  auto o = f.options(4);
  o.prefetch = 20;
  outbox::ConsumerRunner runner(o, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  runner.start();
  // 10 keys x 30 events, interleaved and locally shuffled (as a parked row
  // republished later, or a redelivery after a failover, would arrive).
  std::vector<std::pair<std::string, std::int64_t>> events;
  for (std::int64_t seq = 1; seq <= 30; ++seq)
    for (int k = 0; k < 10; ++k) events.emplace_back("key-" + std::to_string(k), seq);
  std::mt19937 rng(41);
  for (std::size_t i = 0; i + 15 <= events.size(); i += 15)
    std::shuffle(events.begin() + i, events.begin() + i + 15, rng);
  for (const auto& [key, seq] : events) f.publish(key, seq);
  REQUIRE(testenv::eventually(30s, [&] { return f.count("SELECT count(*) FROM " + f.s() + ".applied") == 300; }));
  for (int k = 0; k < 10; ++k) CHECK(f.applied("key-" + std::to_string(k)) == one_to(30));
  CHECK(f.held() == 0);
  CHECK(runner.counters().held > 0);  // the shuffle did bring events early
}

TEST_CASE("a malformed or half sequence is dead-lettered; the key's other events go on") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  runner.start();
  testenv::TestPublisher::Options bad;
  bad.message_id = MessageId::generate_v7().to_string();
  bad.headers = {{"x-outbox-key", "k"}, {"x-outbox-seq", "two"}};
  f.publisher.publish(f.topology.exchange, f.topology.routing_key, "{}", bad);
  bad.message_id = MessageId::generate_v7().to_string();
  bad.headers = {{"x-outbox-key", "k"}};  // a key without its sequence
  f.publisher.publish(f.topology.exchange, f.topology.routing_key, "{}", bad);
  f.publish("k", 1);
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("k").size() == 1; }));
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 2; }));
  CHECK(runner.counters().dead_lettered == 2);
}

TEST_CASE("a new event whose sequence went back is dead-lettered, never skipped as a duplicate") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  runner.start();
  f.publish("k", 1);
  f.publish("k", 2);
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("k").size() == 2; }));
  // The outbox's counter for the key was reset: a new event numbered 1 again.
  f.publish("k", 1);
  REQUIRE(testenv::eventually(10s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  CHECK(f.applied("k") == one_to(2));
  CHECK(runner.counters().duplicates == 0);
}

TEST_CASE("a held event whose handler keeps failing blocks only its key, until an operator retries it") {
  Fixture f;
  std::atomic<bool> broken{true};
  auto o = f.options();
  o.max_attempts = 2;
  outbox::ConsumerRunner runner(o, [&](pqxx::transaction_base& tx, const outbox::Delivery& d) {
    auto ks = outbox::key_sequence_of(d);
    if (broken && ks && ks->key == "poison" && ks->seq == 2) throw std::runtime_error("ledger row locked by audit");
    f.apply(tx, d);
  });
  runner.start();
  f.publish("poison", 2);
  f.publish("poison", 3);
  f.publish("poison", 1);  // releases 2, which fails twice and is stuck
  f.publish("fine", 1);
  REQUIRE(testenv::eventually(15s, [&] { return runner.sequence_status().stuck == 1; }));
  CHECK(f.applied("poison") == std::vector<std::int64_t>{1});
  CHECK(f.applied("fine") == std::vector<std::int64_t>{1});
  CHECK(f.count("SELECT attempts FROM " + f.s() + ".inbox_held WHERE key_seq = 2") == 2);
  CHECK(testenv::sql_value("SELECT last_error FROM " + f.s() + ".inbox_held WHERE key_seq = 2") ==
        "ledger row locked by audit");
  CHECK(testenv::queue_state(f.topology.dead_letter_queue).ready == 0);  // kept in order, not dead-lettered
  // The operator fixed the cause and retries it (docs/CONSUMER.md).
  broken = false;
  testenv::sql_exec("UPDATE " + f.s() +
                    ".inbox_held SET attempts = 0, next_try_at = now() WHERE ordering_key = 'poison'");
  REQUIRE(testenv::eventually(10s, [&] { return f.applied("poison").size() == 3; }));
  CHECK(f.applied("poison") == one_to(3));
}

TEST_CASE("unkeyed events pass the guard untouched") {
  Fixture f;
  outbox::ConsumerRunner runner(f.options(),
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { f.apply(tx, d); });
  runner.start();
  testenv::TestPublisher::Options plain;
  plain.message_id = MessageId::generate_v7().to_string();
  f.publisher.publish(f.topology.exchange, f.topology.routing_key, "{}", plain);
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  CHECK(f.count("SELECT count(*) FROM " + f.s() + ".inbox_key_sequences") == 0);
}
