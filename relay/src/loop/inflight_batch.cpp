#include "loop/inflight_batch.h"

#include <chrono>
#include <utility>

namespace relay {

InflightBatch::InflightBatch(BatchStore& store, std::vector<ClaimedRow> rows, const LoopClock& clock,
                             Clock::time_point claim_started, double claim_started_unix)
    : store_(store), rows_(std::move(rows)), clock_(clock) {
  timeline_.claim_started(claim_started, claim_started_unix);
  claimed_at_ = session_used_at_ = clock_.now();
  claim_ms_ = std::chrono::duration<double, std::milli>(claimed_at_ - claim_started).count();
  tracker_.reset(rows_.size());
  timeline_.claimed(rows_.size(), claimed_at_);
}

void InflightBatch::done_publishing() { publishing_done_ = true; }

void InflightBatch::sent_next() {
  ++published_;
  if (published_ == rows_.size()) done_publishing();
}

void InflightBatch::unpublishable_next(const std::string& reason) {
  tracker_.on_unpublishable(published_, reason);
  sent_next();
}

void InflightBatch::stop_publishing() { done_publishing(); }

std::deque<std::size_t> InflightBatch::withhold(const Failure& why) {
  withheld_ = why;
  done_publishing();
  return std::exchange(suspects_, {});
}

void InflightBatch::lose_link(const Failure& failure) {
  tracker_.fail_outstanding(failure);
  done_publishing();
  suspects_.clear();
}

std::size_t InflightBatch::suspect_outstanding() {
  const auto rows = tracker_.take_outstanding();
  suspects_.insert(suspects_.begin(), rows.begin(), rows.end());
  return rows.size();
}

}  // namespace relay
