#pragma once
// Test support for the consumer SDK: a test's own exchange, queue and dead-letter
// route on the real broker, a confirming publisher, and a polling wait.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amqp_test_client.h"
#include "outbox/consumer_runner.h"

namespace testenv {

// Unique names for an exchange (direct), a queue, a dead-letter exchange and queue.
// Nothing is declared here (the runner declares them); the destructor deletes all four.
class ConsumerTopology {
 public:
  explicit ConsumerTopology(const std::string& prefix = "c");
  ~ConsumerTopology();
  ConsumerTopology(const ConsumerTopology&) = delete;
  ConsumerTopology& operator=(const ConsumerTopology&) = delete;

  std::string exchange, queue, dead_letter_exchange, dead_letter_queue;
  const std::string routing_key = "rk";

  // Runner options for this topology and the test schema (fast retries for tests).
  outbox::RunnerOptions options(const std::string& schema, const std::string& consumer, int concurrency = 1) const;
};

// Publishes persistent messages and waits for the broker's confirm of each.
class TestPublisher {
 public:
  TestPublisher();
  ~TestPublisher();
  TestPublisher(const TestPublisher&) = delete;
  TestPublisher& operator=(const TestPublisher&) = delete;

  struct Options {
    std::string type = "TestEvent";
    std::optional<std::string> message_id;                          // none: the property is left out
    std::optional<std::uint64_t> timestamp_unix_s;                  // the AMQP timestamp property
    std::vector<std::pair<std::string, std::string>> headers;       // long-string values
    std::vector<std::pair<std::string, std::int64_t>> int_headers;  // signed 64-bit values
  };
  void publish(const std::string& exchange, const std::string& routing_key, const std::string& body,
               const Options& options);

 private:
  AmqpTestClient client_;
};

struct QueueState {
  std::uint32_t ready = 0;  // messages waiting (not delivered, not unacked)
  std::uint32_t consumers = 0;
};
// queue.declare passive on a fresh connection. Throws when the queue does not exist.
QueueState queue_state(const std::string& queue);
// Consumers of `queue`; 0 while it does not exist yet.
std::uint32_t consumer_count(const std::string& queue);

// Declares a durable queue with no arguments (as a hand-made queue would be).
void declare_plain_queue(const std::string& queue);

// A consumer that dies while handling: takes one message from `queue` and drops its
// connection without an ack. Returns the message's x-delivery-count header (0 when
// absent), or -1 when no message came within 5 s.
int take_and_crash(const std::string& queue);

}  // namespace testenv
