#pragma once
// RelayLoop: claim, publish with confirms, mark; batch after batch.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amqp_publisher.h"
#include "backoff.h"
#include "config.h"
#include "confirm_tracker.h"
#include "outbox_store.h"
#include "relay_metrics.h"

#include <pqxx/transaction>

namespace relay {

struct RelayCounters {
  std::uint64_t batches = 0;
  std::uint64_t published = 0;     // acked by the broker and marked in a committed batch
  std::uint64_t failed = 0;        // nacked, returned, or lost with the channel/connection
  std::uint64_t parked = 0;        // failures that reached max_attempts
  std::uint64_t commit_unknown = 0;  // batches whose commit outcome is unknown
};

// The relay's main loop. Per batch, in one PostgreSQL transaction: claim due rows
// (FOR UPDATE SKIP LOCKED), publish them all on a confirm channel without waiting
// message by message, settle them from the broker's acks/nacks/returns, mark the
// acked rows published and the rest failed (with backoff), commit.
//
// At-least-once: a row is marked published only after the ack for its own delivery
// tag. If the relay dies, or the commit fails, after the broker acked, the row stays
// pending and is published again (consumers deduplicate by message id). A commit
// whose outcome is unknown (connection lost during COMMIT) is logged as "may
// republish" for the same reason.
//
// Thread safety: none; run() owns the thread. `stop` may be set from any thread
// (a signal handler): the batch in flight is finished and committed, then run()
// returns.
class RelayLoop {
 public:
  // `metrics` (may be null: then a private registry) receives the loop's metrics
  // and liveness/readiness state; it must outlive the loop.
  RelayLoop(RelayConfig config, const std::atomic<bool>& stop, RelayMetrics* metrics = nullptr);

  // Returns the process exit code: 0 after a requested stop (or, with
  // `exit_when_idle`, after the first claim that finds nothing due).
  int run(bool exit_when_idle);

  const RelayCounters& counters() const { return counters_; }

 private:
  bool ensure_connected();
  std::size_t run_batch();
  void publish_all(std::vector<ClaimedRow>& rows);
  bool wait_for_event(std::chrono::milliseconds timeout);
  void settle(const std::vector<ClaimedRow>& rows, std::vector<std::int64_t>& acked,
              std::vector<FailedRow>& failed);
  void commit_batch(pqxx::work& tx, std::size_t acked, std::size_t failed);
  void idle_wait(std::chrono::milliseconds total);
  void maybe_log_summary(bool force);
  void note_state();  // heartbeat and connection gauges for /healthz, /readyz

  RelayConfig config_;
  const std::atomic<bool>& stop_;
  OutboxStore store_;
  AmqpPublisher amqp_;
  ConfirmTracker tracker_;
  Backoff backoff_;
  Backoff reconnect_backoff_;
  RelayCounters counters_;
  std::string channel_failure_;  // last channel close reason within a batch
  bool connection_lost_ = false;
  int reconnect_attempt_ = 0;
  std::string last_connect_error_;
  std::chrono::steady_clock::time_point last_summary_;
  std::uint64_t published_at_last_summary_ = 0;
  std::unique_ptr<metrics::Registry> own_registry_;  // when no RelayMetrics was given
  std::unique_ptr<RelayMetrics> own_metrics_;
  RelayMetrics* metrics_;
};

}  // namespace relay
