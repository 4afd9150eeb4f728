#pragma once
// RelayMetrics: every metric the relay exports, named in one place, plus the
// liveness and readiness state the HTTP endpoints report.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "metrics/batch_timeline.h"
#include "metrics/stage_cpu.h"
#include "outbox/metrics.h"
#include "policy/failure_cause.h"

namespace relay {

// How an idle relay waits (label `role` of outbox_relay_listen_role; docs/ARCHITECTURE.md,
// "Processes and threads"): it holds the waiting lock and producers' inserts wake it; another
// relay holds it and this one waits for a handover; or it answers inserts in the place
// of a holder that does not; or, busy a moment ago, it claims again within a millisecond and leaves
// the lock alone (ListenArmPolicy). kNone: listening is off, failed, or not settled yet.
enum class ListenRole { kNone, kHolder, kBystander, kAnswering, kPolling };

// The relay's metrics (all names start with outbox_relay_) and the state behind
// /healthz and /readyz. Series with labels are created up front, so every series
// exists (at 0) from the first scrape and rate() works at once.
//
// Thread safety: every method may be called from any thread, except the
// confirm-latency methods (on_published, on_acked, on_unconfirmed), which only
// the relay loop's thread calls.
class RelayMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  RelayMetrics(outbox::metrics::Registry& registry, const std::string& version);
  RelayMetrics(const RelayMetrics&) = delete;
  RelayMetrics& operator=(const RelayMetrics&) = delete;

  outbox::metrics::Registry& registry() { return registry_; }
  // The Prometheus text, with the gauges that are ages brought up to now.
  std::string render();

  // --- relay loop hooks -----------------------------------------------------
  // The loop made progress (call at least every few seconds, also while idle).
  void heartbeat();
  void set_connected(bool postgres, bool amqp, bool amqp_blocked);
  // A connection was (re)established; the first one of each peer is not a reconnect.
  void connected_to(const char* peer);  // "postgres" or "amqp"
  // A connection attempt failed: counted by target and cause, and `text` (one line,
  // no secret) is what /readyz says while that target stays unconnected.
  void connect_failed(const char* target, const char* cause, const std::string& text);
  void claimed(std::size_t rows, double claim_seconds);
  // A probe (OutboxStore::has_due_rows) found nothing due: as good as a claim that
  // found nothing for /readyz and the last-claim gauge, not counted as a claim.
  void probed();
  void marked(double mark_and_commit_seconds);
  void committed(std::size_t published, std::size_t failed);
  void failure(FailureReason reason, std::size_t rows = 1);
  void parked(std::size_t rows = 1);
  void commit_unknown();
  // Seconds from the row's created_at (the producer's transaction) to its ack.
  void enqueue_to_confirm(double seconds);
  // A scheduled row acked: seconds from its deliver_at to the ack.
  void scheduled_lateness(double seconds);
  // A row marked published in a committed batch: where its time went.
  void row_stages(const RowStages& stages);
  // The counters of outbox_relay_stage_cpu_seconds_total, by CpuStage (for StageCpu).
  std::array<outbox::metrics::Counter*, kCpuStages> stage_cpu() const { return stage_cpu_; }
  void set_lanes_owned(std::size_t lanes);
  void set_listen_role(ListenRole role);  // 1 on that role's series, 0 on the others
  // Rows are due but none was published for relay.stall_after_s: `why` (one line,
  // no secret) is what /readyz reports. set_stalled(false, "") when it resumes.
  void set_stalled(bool stalled, const std::string& why);
  // The broker nacks every publish (NackRun): `why` is what /readyz reports.
  // set_nacking(false, "") at the next ack.
  void set_nacking(bool nacking, const std::string& why);
  // The broker closed the channel over one of several outstanding rows, and the
  // relay publishes them again one at a time to find it.
  void isolation_started(std::size_t suspects);

  // Delivery-tag timing for publish→confirm latency. Loop thread only.
  void on_published(std::uint64_t tag);
  void on_acked(std::uint64_t tag, bool multiple);
  void on_unconfirmed(std::uint64_t tag, bool multiple);  // nack
  void on_channel_reset();                                // tags restart

  // --- housekeeping hooks (stats and retention thread) ------------------------
  void set_backlog(std::int64_t pending, std::int64_t parked, double oldest_pending_age_s);
  // Scheduled rows not yet due, and in how many seconds the earliest is (none: none).
  void set_scheduled(std::int64_t rows, std::optional<double> next_due_in_s);
  void retention_deleted(std::size_t rows, double seconds);

  // --- endpoints --------------------------------------------------------------
  // Alive unless the loop made no progress for `stall`, or (when
  // `max_disconnected` > 0) PostgreSQL or RabbitMQ has not been connected for
  // longer than it (since start or since the connection was lost).
  std::optional<std::string> not_alive(std::chrono::seconds stall,
                                       std::chrono::seconds max_disconnected = std::chrono::seconds(0)) const;
  // Ready when connected to both servers, not blocked by the broker, not stalled,
  // and a claim completed or the broker acked a row within `max_claim_age`.
  std::optional<std::string> not_ready(std::chrono::seconds max_claim_age) const;

 private:
  static std::int64_t now_ns();

  outbox::metrics::Registry& registry_;
  outbox::metrics::Counter &published_, &batches_, &parked_, &commit_unknown_;
  std::array<outbox::metrics::Counter*, 8> failures_;  // by FailureReason
  outbox::metrics::Counter &reconnects_pg_, &reconnects_amqp_;
  outbox::metrics::Gauge &connected_pg_, &connected_amqp_, &blocked_, &last_claim_;
  outbox::metrics::Gauge &pending_, &parked_rows_, &oldest_age_, &backlog_age_, &lanes_owned_;
  outbox::metrics::Gauge &scheduled_rows_, &scheduled_next_due_;
  outbox::metrics::Histogram &batch_size_, &claim_seconds_, &mark_seconds_;
  outbox::metrics::Histogram &enqueue_to_confirm_, &publish_to_confirm_, &scheduled_lateness_;
  std::array<outbox::metrics::Histogram*, kLatencyStages> stage_seconds_;  // by LatencyStage
  std::array<outbox::metrics::Counter*, kCpuStages> stage_cpu_;            // by CpuStage
  outbox::metrics::Gauge &stalled_, &nacking_;
  std::array<outbox::metrics::Gauge*, 4> listen_role_;  // holder, bystander, answering, polling
  outbox::metrics::Counter &isolations_, &isolated_rows_;
  mutable std::mutex stall_mutex_;
  std::string stall_reason_, nacking_reason_;          // guarded by stall_mutex_
  std::string connect_error_pg_, connect_error_amqp_;  // guarded by stall_mutex_
  outbox::metrics::Counter& retention_deleted_;
  outbox::metrics::Histogram& retention_batch_seconds_;

  std::atomic<std::int64_t> heartbeat_ns_;
  std::atomic<std::int64_t> last_claim_ns_{0};  // 0: never
  std::atomic<std::int64_t> last_ack_ns_{0};    // 0: never
  std::atomic<std::int64_t> backlog_ns_{0};     // when set_backlog last ran; 0: never
  std::atomic<std::int64_t> disconnected_ns_;   // since when a server is not connected; 0: both are
  std::atomic<bool> seen_pg_{false}, seen_amqp_{false};
  std::map<std::uint64_t, Clock::time_point> unconfirmed_;  // loop thread only
};

}  // namespace relay
