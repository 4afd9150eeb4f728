#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// ConsumerRunner: consumes an AMQP queue and runs a handler once per message,
// in one PostgreSQL transaction with the inbox; acks after the commit.

#include <memory>

#include "outbox/consumer_counters.h"
#include "outbox/environment_error.h"
#include "outbox/metrics.h"
#include "outbox/runner_options.h"  // RunnerOptions, Handler: what a runner is given
#include "outbox/sequence_status.h"

namespace outbox {

// Per message: BEGIN; inbox insert (a duplicate is acked and skipped); handler;
// COMMIT; then basic.ack. A failed try rolls back and is requeued (basic.nack) after
// a backoff, or dead-lettered (basic.reject) once max_attempts is reached. A lost
// PostgreSQL connection or a commit with an unknown outcome says nothing about the
// message: it is requeued without counting a try (a commit that did happen turns
// the redelivery into a duplicate).
//
// Thread safety: start/stop/wait/counters may be called from any thread; the
// handler is called from `concurrency` worker threads at once and must be
// thread-safe. Not copyable (owns threads and connections).
class ConsumerRunner {
 public:
  // Throws ValidationError for bad options.
  ConsumerRunner(RunnerOptions options, Handler handler);
  ~ConsumerRunner();  // stops and joins
  ConsumerRunner(const ConsumerRunner&) = delete;
  ConsumerRunner& operator=(const ConsumerRunner&) = delete;

  // Declares the queue, its bindings and the dead-letter exchange and queue, on a
  // connection of its own, without consuming (a deploy step can call it alone).
  // Throws when the broker is unreachable or the topology conflicts with what exists.
  void declare_topology();
  // Declares the topology, connects every worker (AMQP + PostgreSQL) and starts
  // consuming. Throws (with nothing left running) when a server is unreachable or
  // the topology conflicts with what exists. Later connection losses are retried.
  void start();
  // Asks every worker to finish its in-flight message (commit and ack) and stop.
  // Unhandled prefetched messages go back to the queue. Returns at once.
  void stop();
  bool stopping() const;
  // Blocks until every worker stopped.
  void wait();
  // start(), then blocks until SIGTERM or SIGINT (or stop()), then stops gracefully.
  // Returns the signal number, or 0 when stopped otherwise.
  int run_until_signal();

  const ConsumerCounters& counters() const;
  // With sequence_guard: the keys that wait for a missing event, as last read (every
  // few seconds) from the database; `enabled` false without a guard. For the
  // application's /readyz or status page.
  SequenceStatus sequence_status() const;
  // The registry holding the counters as Prometheus series; serve
  // `metrics().render()` at the application's GET /metrics (docs/CONSUMER.md).
  metrics::Registry& metrics() const;
  const RunnerOptions& options() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace outbox
