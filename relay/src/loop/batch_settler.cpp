#include "loop/batch_settler.h"

#include <spdlog/spdlog.h>

#include "outbox/log_fields.h"
#include "outbox/one_line.h"
#include "policy/failure_policy.h"

namespace relay {

BatchSettler::BatchSettler(const RelaySettings& relay, RelayMetrics& metrics, const LoopClock& clock)
    : max_attempts_(relay.max_attempts), backoff_(relay), metrics_(metrics), clock_(clock) {}

SettledBatch BatchSettler::settle(const InflightBatch& b, const Failure& unsent) {
  SettledBatch out;
  const double now_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (std::size_t i = 0; i < b.rows().size(); ++i) {
    const auto& row = b.rows()[i];
    const auto outcome = b.tracker().outcome(i);
    const bool never_settled = outcome == ConfirmTracker::Outcome::kUnconfirmed && b.tracker().reason(i).empty();
    const FailureCause cause = never_settled ? unsent.cause : b.tracker().cause(i);
    const std::string& reason = never_settled ? unsent.text : b.tracker().reason(i);
    // The environment's failures wait a step further each time in a row.
    const int streak = FailurePolicy::waits_on_environment(outcome, cause) ? streaks_.count_failure(row.id) : 0;
    const auto s = FailurePolicy::settle(outcome, cause, row.attempts, max_attempts_, streak);
    if (s.action == Settlement::Action::kMarkPublished || s.verdict.counts_as_attempt)
      streaks_.forget(row.id);  // published, charged or parked: the streak ends
    if (s.action == Settlement::Action::kMarkPublished) {
      out.acked.push_back(&row);
      metrics_.enqueue_to_confirm(now_unix - row.created_unix);
      if (row.scheduled) metrics_.scheduled_lateness(now_unix - row.created_unix);
      continue;
    }
    fail(row, s, reason, out);
    out.failed.back().refused_by_broker = outcome == ConfirmTracker::Outcome::kRefused;
  }
  return out;
}

void BatchSettler::fail(const ClaimedRow& row, const Settlement& s, const std::string& why, SettledBatch& out) {
  metrics_.failure(s.verdict.metric);
  FailedRow f{row.id, outbox::one_line(why.empty() ? "not published: connection lost before publish" : why), 0,
              s.verdict.counts_as_attempt};
  if (s.action != Settlement::Action::kRetryAtOnce) {
    f.retry_in_ms = backoff_.delay(s.backoff_attempt).count();
    // The stall report's cause: a row's own failure, or the environment's that
    // makes it wait, not a mere retry at once.
    out.last_failure = "row " + std::to_string(row.id) + ": " + f.error;
  }
  if (s.action == Settlement::Action::kPark) {
    ++out.parked;
    metrics_.parked();
    outbox::LogFields fields{{"row_id", row.id},
                             {"message_id", outbox::one_line(row.message_id, 64)},
                             {"attempt", row.attempts + 1},
                             {"reason", f.error}};
    spdlog::warn("row {} (message {}) parked after {} attempts: {}", row.id, outbox::one_line(row.message_id, 64),
                 row.attempts + 1, f.error);
  } else {
    const auto due = clock_.now() + std::chrono::milliseconds(f.retry_in_ms);
    if (!out.retry_due_until || due > *out.retry_due_until) out.retry_due_until = due;
  }
  out.failed.push_back(std::move(f));
}

void BatchSettler::observe_stages(const InflightBatch& b, std::chrono::steady_clock::time_point committed) {
  for (std::size_t i = 0; i < b.rows().size(); ++i) {
    if (b.tracker().outcome(i) != ConfirmTracker::Outcome::kAcked) continue;
    if (const auto stages = b.timeline().stages(i, b.rows()[i].created_unix, committed)) metrics_.row_stages(*stages);
  }
}

}  // namespace relay
