#pragma once
// BatchSettler: each row of a settled batch to its fate (published, retried, parked).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "loop/inflight_batch.h"
#include "metrics/relay_metrics.h"
#include "policy/backoff.h"
#include "policy/failure_cause.h"
#include "policy/failure_policy.h"
#include "policy/loop_clock.h"
#include "policy/retry_streaks.h"

namespace relay {

// What a batch's mark writes, and what the loop learns from it.
struct SettledBatch {
  std::vector<const ClaimedRow*> acked;  // marked published (acked by the broker: only those)
  std::vector<FailedRow> failed;         // retried or parked
  std::size_t parked = 0;
  // The latest failure that makes a row wait (a row's own, or a nack, a confirm
  // timeout), one line, for the stall report; empty when every failed row is
  // retried at once.
  std::string last_failure;
  // The latest retry scheduled: until then an empty claim does not mean nothing is due.
  std::optional<std::chrono::steady_clock::time_point> retry_due_until;
};

// FailurePolicy decides each row's fate from its ConfirmTracker outcome and typed
// cause; this applies it: the retry delay (relay.backoff_*, and a growing one for
// the environment's failures of a row in a row, RetryStreaks), the metrics, and the
// warning for a parked row. Rows a batch left unsent take `unsent`'s cause and text
// (a resource alarm, the batch's time limit).
//
// Retries are due on `clock`'s time; the wall clock dates the rows' latencies.
// Thread safety: none; the loop's thread owns it. REQUIRES: `metrics` and `clock`
// outlive it.
class BatchSettler {
 public:
  BatchSettler(const RelaySettings& relay, RelayMetrics& metrics, const LoopClock& clock);

  SettledBatch settle(const InflightBatch& batch, const Failure& unsent);
  // After the batch committed: each published row's stages (claim, publish,
  // confirm, mark) into the metrics; rows published again in an isolation count
  // from their last publish.
  void observe_stages(const InflightBatch& batch, std::chrono::steady_clock::time_point committed);

 private:
  void fail(const ClaimedRow& row, const Settlement& s, const std::string& why, SettledBatch& out);

  int max_attempts_;
  Backoff backoff_;
  RelayMetrics& metrics_;
  const LoopClock& clock_;
  // Per row: the environment's failures in a row, for their growing backoff.
  RetryStreaks streaks_{100000};
};

}  // namespace relay
