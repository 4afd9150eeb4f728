#pragma once
// RelayLoop: claim, publish with confirms, mark; batch after batch.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/amqp_publisher.h"
#include "policy/backoff.h"
#include "policy/batch_deadline.h"
#include "broker/broker_event.h"
#include "config/config.h"
#include "policy/confirm_tracker.h"
#include "policy/failure_policy.h"
#include "loop/inflight_batch.h"
#include "pg/lane_manager.h"
#include "policy/claim_floor_policy.h"
#include "policy/listen_arm_policy.h"
#include "pg/notify_listener.h"
#include "pg/outbox_store.h"
#include "metrics/relay_metrics.h"
#include "policy/retry_streaks.h"
#include "metrics/stage_cpu.h"



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
// Up to relay.pipeline_depth batches are in flight, each in its own transaction on
// its own connection: while the broker confirms one, the next is claimed (SKIP
// LOCKED passes over the rows the first one holds) and published. A batch commits as
// soon as all its own tags are settled. When a claim finds nothing, the relay arms
// its NotifyListener and sleeps until a producer's notification, its fallback poll
// or its own earliest retry.
//
// At-least-once: a row is marked published only after the ack for its own delivery
// tag. If the relay dies, or the commit fails, after the broker acked, the row stays
// pending and is published again (consumers deduplicate by message id). A commit
// whose outcome is unknown (connection lost during COMMIT) is logged as "may
// republish" for the same reason.
//
// Thread safety: none; run() owns the thread. `stop` may be set from any thread
// (a signal handler): the batches in flight are finished and committed, then run()
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
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  bool ensure_connected();
  std::string connect_missing();
  OutboxStore& primary() { return *stores_.front(); }
  OutboxStore* free_store();  // connected, with no batch in flight
  bool can_claim();
  std::size_t claim_batch(bool probe_first);
  std::vector<ClaimedRow> claim_rows(OutboxStore& store, BatchTransaction& tx, int limit);
  bool publish_pending();
  bool publish_some(InflightBatch& batch);
  bool publish_probe();
  bool publish_suspect(InflightBatch& batch);
  bool publish_row(InflightBatch& batch, std::size_t row);
  bool held() const { return Clock::now() < hold_until_; }
  // Claims and publishes nothing for reconnect_backoff_.delay(step): the step is
  // a count of faults in a row (a channel close nobody is to blame for; without
  // `step`, environment_closes_), so a fault that repeats never spins.
  void hold_publishing(const std::string& why);
  void hold_publishing(const std::string& why, int step);
  void on_channel_closed(const BrokerEvent& event);
  // kChargeSole: the one outstanding row provoked the close; it is settled kRefused.
  void charge_sole_outstanding(const std::string& reason, int reply_code);
  // Whether `row` goes alone: refused before, bound for an exchange the broker
  // refused lately (404, 403), or a suspect of an isolation cut short. Sets
  // row.refused_before accordingly.
  bool must_go_alone(ClaimedRow& row);
  void note_progress() { progress_at_ = Clock::now(); }
  void check_stall();
  bool load_payloads(InflightBatch& batch);
  std::size_t outstanding() const;
  bool window_has_room_for(std::size_t payload_bytes) const;  // amqp.publish_window_bytes
  bool isolating() const;  // some batch has suspects to publish alone
  void pump_events();
  void await_broker();
  // When the oldest delivery tag still unconfirmed was written; none: nothing is.
  std::optional<Clock::time_point> oldest_unconfirmed() const;
  // The broker confirms others but left some rows unconfirmed for confirm_timeout:
  // those fail (no attempt, a growing backoff) and the connection stays.
  void fail_overdue(std::chrono::milliseconds timeout);
  // Each batch's BatchDeadline: past publish_for() it publishes no more; past
  // commit_within() its unconfirmed rows fail (no attempt) and it commits.
  void enforce_deadlines();
  bool wait_for_event(std::chrono::milliseconds timeout);
  void connection_lost(const std::string& reason);
  bool finish_one_settled();
  void finish_batch(InflightBatch& batch);
  void settle(InflightBatch& batch, std::vector<const ClaimedRow*>& acked, std::vector<FailedRow>& failed);
  FailedRow failed_row(const ClaimedRow& row, const Settlement& settlement, const std::string& why);
  bool commit_batch(InflightBatch& batch, const std::vector<const ClaimedRow*>& acked_rows,
                    const std::vector<FailedRow>& failed_rows);
  void observe_stages(const InflightBatch& batch);  // after its commit: each published row's stages
  void note_retries(const std::vector<FailedRow>& failed);
  void sleep_until_work();
  bool listener_ready();
  // `handover_only`: a relay that does not hold the waiting lock sleeps through
  // producers' notifications (the holder answers them) and wakes on a handover.
  bool wait_for_work(Clock::time_point until, bool handover_only);
  void give_back_listen_lock();  // this relay cannot work now: another may take the lock
  // After each claim: whether the holder of the waiting lock answers the producers
  // (see answer_for_holder_).
  void judge_lock_holder(const std::vector<ClaimedRow>& rows);
  void idle_wait(std::chrono::milliseconds total);
  void maybe_log_summary(bool force);
  void note_state();  // heartbeat and connection gauges for /healthz, /readyz
  bool rebalance_due() const { return lanes_ && Clock::now() >= next_rebalance_; }
  void rebalance_lanes();  // REQUIRES: no batch in flight

  RelayConfig config_;
  const std::atomic<bool>& stop_;
  std::vector<std::unique_ptr<OutboxStore>> stores_;  // one per batch in flight
  AmqpPublisher amqp_;
  NotifyListener listener_;
  ListenArmPolicy arm_policy_;  // when an armed listener gives its lock back
  ClaimFloorPolicy floor_policy_;  // where a claim behind batches in flight starts
  Backoff backoff_;
  Backoff reconnect_backoff_;
  BatchDeadline deadline_;
  RelayCounters counters_;
  // Per row: failures of the environment's in a row, for their growing backoff.
  RetryStreaks streaks_{100000};
  std::vector<std::unique_ptr<InflightBatch>> inflight_;  // claim order
  std::unique_ptr<LaneManager> lanes_;  // relay.ordering per_key only; locks on primary()
  KeyCursor key_cursor_;                // per_key: where the next claim's walk over the keys goes on
  Clock::time_point next_rebalance_{};
  bool last_claim_empty_ = false;  // the last claim found nothing: sleep before the next
  Clock::time_point last_claim_at_{};
  bool caught_up_ = true;          // the last claim was not full: no backlog to pipeline
  bool probe_first_ = false;       // next claim: ask has_due_rows() first (fallback poll)
  NotifyListener::Arm arm_state_ = NotifyListener::Arm::kProducerBusy;
  bool listener_failed_ = false;   // logged once until it works again
  // The last wake: the fallback poll of a relay that did not hold the waiting lock,
  // or a notification. Read by judge_lock_holder() at the claim that follows.
  bool polled_as_bystander_ = false, woke_on_notification_ = false;
  // A fallback poll found new rows (never attempted) due though another relay holds
  // the lock: that holder does not answer (a session orphaned by a partition, a
  // process stopped without exiting). Until a claim on a notification finds nothing
  // again, this relay answers the producers' notifications too.
  bool answer_for_holder_ = false;
  std::optional<Clock::time_point> next_retry_at_;  // earliest retry this relay scheduled
  Clock::time_point last_broker_event_;             // last ack, nack, return or close read
  // A probe (suspects of an isolation, or a row refused before) is outstanding:
  // nothing else goes out until the broker settles it, so a channel close then
  // points into it.
  bool solo_ = false;
  // Suspects per probe group: half of those outstanding at the last close, so the
  // row at fault is found in about 2 log2(n) confirm round trips, and each
  // innocent suspect is published again at most twice per poison row on average
  // (in all at most 2 n extra publishes for n suspects).
  std::size_t probe_size_ = 1;
  // After a channel close no message is to blame for: publish nothing until then
  // (backoff, reset by the next ack), so a fault of the broker's never spins.
  Clock::time_point hold_until_{};
  int environment_closes_ = 0;
  int rollbacks_in_a_row_ = 0;  // batches whose mark failed since the last commit
  // Stall detection: the last time a row was published or nothing was due.
  Clock::time_point progress_at_ = Clock::now();
  std::optional<Clock::time_point> retry_due_until_;  // the latest retry this relay scheduled
  bool stalled_ = false;
  Clock::time_point stall_began_{};  // progress_at_ when the stall was reported
  std::string last_failure_;  // the latest failure, one line, for the stall report
  std::string last_refusal_;  // the last channel close charged to a row (logged once in a row)
  // Exchanges the broker refused a row for (404 missing, 403 access or internal),
  // until when: rows bound for them go alone, so each costs one channel close
  // instead of an isolation that republishes the innocent rows around it. Bounded.
  std::map<std::string, Clock::time_point> refusing_exchanges_;
  // Rows that were suspects of an isolation its batch's time limit cut short: they
  // go alone for a while (see enforce_deadlines). Bounded.
  std::map<std::int64_t, Clock::time_point> lone_rows_;
  int reconnect_attempt_ = 0;
  Clock::time_point last_connected_at_{};  // the last time both sessions came up
  int quick_losses_ = 0;  // connections lost within a second of being made, in a row
  std::string last_connect_error_;
  std::set<std::string> outage_errors_;  // connect errors logged since the last success
  std::chrono::steady_clock::time_point last_summary_;
  std::uint64_t published_at_last_summary_ = 0;
  std::unique_ptr<outbox::metrics::Registry> own_registry_;  // when no RelayMetrics was given
  std::unique_ptr<RelayMetrics> own_metrics_;
  RelayMetrics* metrics_;
  std::unique_ptr<StageCpu> cpu_;       // the loop thread's CPU by stage, into metrics_
  std::vector<std::size_t> acked_rows_;  // scratch: the rows one ack settled
};

}  // namespace relay
