// ConsumerRunner on quorum queues (x-queue-type: quorum), the queue type of a
// RabbitMQ cluster: the broker's delivery count reaches the handler, and
// x-delivery-limit dead-letters a message whose handler crashes every process that
// takes it (the runner's own max_attempts counts per process and never gets there).

#include <doctest/doctest.h>

#include <atomic>
#include <pqxx/pqxx>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;
using outbox::MessageId;

struct Fixture {
  testenv::ScopedSchema schema{"quorum"};
  testenv::ConsumerTopology topology{"quorum"};
  testenv::TestPublisher publisher;

  outbox::RunnerOptions options(int delivery_limit) const {
    auto o = topology.options(schema.name(), testenv::unique_name("consumer"));
    o.queue_type = outbox::QueueType::kQuorum;
    o.max_attempts = 2;
    o.delivery_limit = delivery_limit;
    return o;
  }
  // Declares the topology (a runner started and stopped at once).
  void declare(const outbox::RunnerOptions& o) {
    outbox::ConsumerRunner runner(o, [](pqxx::transaction_base&, const outbox::Delivery&) {});
    runner.start();
    runner.stop();
    runner.wait();
  }
  void publish() {
    testenv::TestPublisher::Options p;
    p.message_id = MessageId::generate_v7().to_string();
    publisher.publish(topology.exchange, topology.routing_key, "{}", p);
  }
};

outbox::ValidationError validation_error(const outbox::RunnerOptions& o) {
  try {
    outbox::validate_runner_options(o);
  } catch (const outbox::ValidationError& e) {
    return e;
  }
  FAIL("accepted");
  return outbox::ValidationError("", "");
}

}  // namespace

TEST_CASE("on a quorum queue the handler's attempt counts the returns of crashed consumers") {
  Fixture f;
  auto o = f.options(10);
  f.declare(o);
  f.publish();
  CHECK(testenv::take_and_crash(f.topology.queue) == 0);  // first delivery: no count yet
  CHECK(testenv::take_and_crash(f.topology.queue) == 1);  // the broker counted the return
  std::atomic<int> attempt{0};
  outbox::ConsumerRunner runner(o, [&](pqxx::transaction_base&, const outbox::Delivery& d) { attempt = d.attempt; });
  runner.start();
  REQUIRE(testenv::eventually(10s, [&] { return runner.counters().processed == 1; }));
  runner.stop();
  runner.wait();
  CHECK(attempt == 3);  // two crashed deliveries before this one, though this process saw none
}

TEST_CASE("x-delivery-limit dead-letters a message that crashes every consumer taking it") {
  Fixture f;
  const int limit = 2;
  f.declare(f.options(limit));
  f.publish();
  int crashes = 0;
  while (crashes < limit + 3 && testenv::take_and_crash(f.topology.queue) >= 0) ++crashes;
  // Taken at most limit + 1 times, then the broker moved it to the dead-letter queue.
  CHECK(crashes <= limit + 1);
  CHECK(testenv::eventually(5s, [&] { return testenv::queue_state(f.topology.dead_letter_queue).ready == 1; }));
  CHECK(testenv::queue_state(f.topology.queue).ready == 0);
}

TEST_CASE("delivery_limit needs a quorum queue and at least max_attempts") {
  Fixture f;
  auto o = f.options(5);
  CHECK_NOTHROW(outbox::validate_runner_options(o));
  o.queue_type = outbox::QueueType::kClassic;
  CHECK(validation_error(o).field() == "delivery_limit");
  o = f.options(1);  // below max_attempts (2): the broker would cut the runner's retries short
  auto e = validation_error(o);
  CHECK(e.field() == "delivery_limit");
  CHECK(std::string(e.what()).find("max_attempts (2)") != std::string::npos);
}
