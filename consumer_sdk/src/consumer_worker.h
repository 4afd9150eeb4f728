#pragma once
// ConsumerWorker: one consuming thread of a ConsumerRunner.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "amqp_consumer.h"
#include "outbox/sequence_guard.h"
#include "set_aside_queue.h"
#include "shared_state.h"
#include "watched_connection.h"

namespace outbox::detail {

// Owns one AMQP connection and one PostgreSQL connection; handles one message at a
// time on its own thread. Thread safety: connect() and run() on one thread only.
class ConsumerWorker {
 public:
  ConsumerWorker(SharedState& shared, int index);
  ~ConsumerWorker();
  ConsumerWorker(const ConsumerWorker&) = delete;
  ConsumerWorker& operator=(const ConsumerWorker&) = delete;

  // Connects both servers and starts consuming. Throws on failure.
  void connect();
  // Consumes until the stop signal; reconnects with backoff after a connection loss.
  void run();

 private:
  // kEnvironment: not the message's fault (a lost PostgreSQL session, an EnvironmentError).
  // kHeld: before its turn on its key; kept in inbox_held (sequence guard).
  enum class Outcome { kProcessed, kDuplicate, kHeld, kFailed, kPermanent, kEnvironment };
  void consume_until_stopped();
  void handle(InboundMessage& message);
  Outcome run_transaction(const Delivery& delivery, const std::optional<KeySequence>& ks, bool& next_held,
                          std::string& error);
  // Runs `body` (one transaction on pg_) and classifies what it throws.
  Outcome classified(const std::function<Outcome()>& body, std::string& error);
  Outcome session_lost(std::string what, std::string& error);
  // Sequence guard (consumer_worker_held.cpp): applies `key`'s held events whose
  // turn has come, each in its own transaction, until one is missing or fails.
  void drain_held(const std::string& key);
  // Every second: drains the keys whose next event is held and due (their turn came
  // in another process, or a try failed before); worker 0 also refreshes the status.
  void sweep_held(bool force);
  void refresh_sequence_status();
  void settle_failure(InboundMessage& message, Outcome outcome, const std::string& error);
  // Requeues what is set aside (at a stop: another worker or process tries it next).
  void requeue_set_aside();
  void note_late_delivery(const Delivery& delivery);

  SharedState& shared_;
  int index_;
  std::string name_;  // "consumer#index", for logs
  AmqpConsumer amqp_;
  std::string pg_dsn_;  // options.pg_dsn with the session limits (session_dsn); never logged
  std::unique_ptr<WatchedConnection> pg_;
  int environment_failures_ = 0;  // kEnvironment outcomes in a row; sets the pause before the next message
  SetAsideQueue set_aside_;       // RetryOrder::kSetAside: failed messages waiting for their retry
  std::chrono::steady_clock::time_point next_sweep_{}, next_status_{};
  std::set<std::string> reported_gaps_;  // keys logged as gapped (worker 0), until they are not
  std::int64_t reported_stuck_ = 0;
};

}  // namespace outbox::detail
