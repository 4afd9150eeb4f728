#pragma once
// RelayLoop: claim, publish with confirms, mark; batch after batch.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker_link.h"
#include "config/config.h"
#include "loop/batch_pipeline.h"
#include "loop/batch_publisher.h"
#include "loop/batch_settler.h"
#include "loop/confirm_reader.h"
#include "loop/isolator.h"
#include "loop/publish_hold.h"
#include "loop/reconnect_supervisor.h"
#include "loop/stall_watch.h"
#include "loop/wake_coordinator.h"
#include "metrics/relay_metrics.h"
#include "metrics/stage_cpu.h"
#include "pg/batch_store.h"
#include "pg/lane_manager.h"
#include "pg/wake_listener.h"
#include "policy/claim_floor_policy.h"
#include "policy/connect_failure.h"
#include "policy/loop_clock.h"

namespace relay {

struct RelayCounters {
  std::uint64_t batches = 0;
  std::uint64_t published = 0;       // acked by the broker and marked in a committed batch
  std::uint64_t failed = 0;          // nacked, returned, or lost with the channel/connection
  std::uint64_t parked = 0;          // failures that reached max_attempts
  std::uint64_t commit_unknown = 0;  // batches whose commit outcome is unknown
};

// What the loop runs on: its broker link, a store per batch in flight
// (relay.pipeline_depth), the listener that wakes it, its clock. admin/cmd_run.cpp
// wires the real ones (AmqpPublisher, OutboxStore, NotifyListener, steady_clock);
// the loop's unit tests wire fakes.
struct RelayLinks {
  std::unique_ptr<BrokerLink> broker;
  std::vector<std::unique_ptr<BatchStore>> stores;  // at least one; the first is the primary (lanes, summary)
  std::unique_ptr<WakeListener> listener;
  const LoopClock* clock = &LoopClock::steady();
};

// The relay's main loop, the story of one batch: claim due rows in a transaction
// (FOR UPDATE SKIP LOCKED; the row locks are the lease), publish them on a confirm
// channel without waiting message by message (BatchPublisher), settle them from the
// broker's acks, nacks, returns and closes (ConfirmReader), decide each row's fate
// (BatchSettler, FailurePolicy), mark and commit. Up to relay.pipeline_depth batches
// are in flight (BatchPipeline), each on its own session: while the broker confirms
// one, the next is claimed. When a claim finds nothing, the relay waits for a
// producer's notification, its fallback poll or its own earliest retry
// (WakeCoordinator). Around it: Isolator (rows that go alone, probe groups),
// PublishHold (the pause after a fault nobody is to blame for), StallWatch,
// ReconnectSupervisor.
//
// At-least-once: a row is marked published only after the ack for its own delivery
// tag. If the relay dies, or the commit fails, after the broker acked, the row stays
// pending and is published again (consumers deduplicate by message id). A commit
// whose outcome is unknown (connection lost during COMMIT) is logged as "may
// republish" for the same reason.
//
// Thread safety: none; run() owns the thread. `stop` may be set from any thread (a
// signal handler): the batches in flight are finished and committed, then run()
// returns. Owns its links: not copyable.
class RelayLoop {
 public:
  // `metrics` (may be null: then a private registry) receives the loop's metrics and
  // liveness/readiness state; it must outlive the loop. REQUIRES: `links` has a
  // broker, a listener and at least one store.
  RelayLoop(RelayConfig config, RelayLinks links, const std::atomic<bool>& stop, RelayMetrics* metrics = nullptr);
  RelayLoop(const RelayLoop&) = delete;
  RelayLoop& operator=(const RelayLoop&) = delete;

  // Returns the process exit code: 0 after a requested stop (or, with
  // `exit_when_idle`, after the first claim that finds nothing due).
  int run(bool exit_when_idle);

  const RelayCounters& counters() const { return counters_; }

 private:
  using Clock = LoopClock::Clock;

  bool ensure_connected();  // REQUIRES: no batch in flight
  struct ConnectError {
    ConnectTarget target;
    std::string text;  // one line, no secret
    // Decided at the catch, on the exception's type (an AmqpError's fields).
    ConnectFailure kind;
  };
  std::optional<ConnectError> connect_missing();
  BatchStore& primary() { return *stores_.front(); }
  BatchStore* free_store();  // connected, with no batch in flight
  bool can_claim();
  void claim_batch(bool probe_first);
  std::vector<ClaimedRow> claim_rows(BatchStore& store, int limit);
  void claim_failed(BatchStore& store, const std::exception& e);
  bool finish_one_settled();
  void finish_batch(InflightBatch& batch);
  bool commit_batch(InflightBatch& batch, const SettledBatch& settled);
  void batch_abandoned(InflightBatch& batch, const std::string& why, bool keep_session);
  void note_retries(const std::vector<FailedRow>& failed);
  void sleep_until_work();
  std::optional<Clock::time_point> next_scheduled();
  bool rebalance_due() const { return lanes_ && Clock::now() >= next_rebalance_; }
  void rebalance_lanes();  // REQUIRES: no batch in flight
  void note_state();       // heartbeat, connection gauges and stall for /healthz, /readyz
  void maybe_log_summary(bool force);

  RelayConfig config_;
  RelayLinks links_;
  const LoopClock& clock_;
  const std::atomic<bool>& stop_;
  std::unique_ptr<outbox::metrics::Registry> own_registry_;  // when no RelayMetrics was given
  std::unique_ptr<RelayMetrics> own_metrics_;
  RelayMetrics& metrics_;
  BrokerLink& amqp_;                                  // links_.broker
  std::vector<std::unique_ptr<BatchStore>>& stores_;  // links_.stores: one per batch in flight
  std::unique_ptr<LaneManager> lanes_;                // relay.ordering per_key only; locks on primary()
  KeyCursor key_cursor_;                              // per_key: where the next claim's walk over the keys goes on
  Clock::time_point next_rebalance_{};
  BatchPipeline batches_;
  Isolator isolator_;
  PublishHold hold_;
  StallWatch stall_;
  ReconnectSupervisor reconnect_;
  ConfirmReader reader_;
  BatchPublisher publisher_;
  BatchSettler settler_;
  WakeCoordinator wake_;
  ClaimFloorPolicy floor_policy_;  // where a claim behind batches in flight starts
  RelayCounters counters_;
  bool last_claim_empty_ = false;  // the last claim found nothing: sleep before the next
  bool caught_up_ = true;          // the last claim was not full: no backlog to pipeline
  bool probe_first_ = false;       // next claim: ask has_due_rows() first (fallback poll)
  Clock::time_point last_claim_at_{};
  std::optional<Clock::time_point> next_retry_at_;  // earliest retry this relay scheduled
  Clock::time_point last_summary_;
  std::uint64_t published_at_last_summary_ = 0;
  std::unique_ptr<StageCpu> cpu_;  // the loop thread's CPU by stage, into metrics_
};

}  // namespace relay
