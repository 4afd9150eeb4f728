#pragma once
// BatchTimeline: when each row of one batch was claimed, published and acked.

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace relay {

// Where a published row's time from its producer's commit to the relay's commit
// went (label `stage` of outbox_relay_stage_seconds); the five add up to it.
enum class LatencyStage : std::size_t {
  kQueued,   // created_at (the producer's transaction) -> the start of the claim that took it
  kClaim,    // that claim: statement and decoding
  kPublish,  // the claim's end -> the row's basic.publish written (behind earlier rows,
             // the publish window, a payload fetch)
  kConfirm,  // its basic.publish -> the broker's ack covering its delivery tag
  kSettle,   // that ack -> the batch committed (the batch's other acks, mark, commit)
};
constexpr std::size_t kLatencyStages = 5;
const char* latency_stage_name(LatencyStage stage);

using RowStages = std::array<double, kLatencyStages>;  // seconds, by LatencyStage

// Timestamps of one claimed batch: steady_clock for the durations inside the relay,
// the system clock only for created_at -> claim (created_at is the database's
// clock). Vectors sized with the batch, so recording a row is a store.
//
// Plain data of the relay loop's thread; pure (the caller passes the times).
class BatchTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // The claim started at `at`, which the system clock calls `unix_s`.
  void claim_started(Clock::time_point at, double unix_s);
  // The claim returned `rows` rows at `at`.
  void claimed(std::size_t rows, Clock::time_point at);
  // Row `row` was (again) written to the broker at `at`.
  void published(std::size_t row, Clock::time_point at) { published_[row] = at; }
  // When row `row` was last written to the broker. REQUIRES: it was.
  Clock::time_point published_at(std::size_t row) const { return published_[row]; }
  // An ack covering row `row`'s delivery tag arrived at `at`.
  void acked(std::size_t row, Clock::time_point at) { acked_[row] = at; }

  // Row `row`'s stages for a batch committed at `committed`; nullopt unless it was
  // published and then acked. `created_unix` is its created_at; a created_at ahead
  // of the relay's clock (skew between hosts) counts as queued 0.
  std::optional<RowStages> stages(std::size_t row, double created_unix, Clock::time_point committed) const;

 private:
  Clock::time_point claim_start_{}, claim_end_{};
  double claim_start_unix_ = 0;
  std::vector<Clock::time_point> published_, acked_;
};

}  // namespace relay
