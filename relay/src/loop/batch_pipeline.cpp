#include "loop/batch_pipeline.h"

#include <algorithm>

namespace relay {

std::unique_ptr<InflightBatch> BatchPipeline::take_settled() {
  for (auto it = batches_.begin(); it != batches_.end(); ++it) {
    if (!(*it)->settled()) continue;
    auto batch = std::move(*it);
    batches_.erase(it);
    return batch;
  }
  return nullptr;
}

bool BatchPipeline::uses(const BatchStore* store) const {
  return std::any_of(begin(), end(), [&](const auto& b) { return &b->store() == store; });
}

std::size_t BatchPipeline::outstanding() const {
  std::size_t n = 0;
  for (const auto& b : batches_) n += b->tracker().outstanding();
  return n;
}

std::size_t BatchPipeline::outstanding_bytes() const {
  std::size_t n = 0;
  for (const auto& b : batches_) n += b->tracker().outstanding_bytes();
  return n;
}

bool BatchPipeline::isolating() const {
  return std::any_of(begin(), end(), [](const auto& b) { return b->has_suspects(); });
}

bool BatchPipeline::all_published() const {
  return std::all_of(begin(), end(), [](const auto& b) { return !b->publishing(); });
}

std::optional<std::pair<std::int64_t, std::int64_t>> BatchPipeline::id_range() const {
  std::optional<std::pair<std::int64_t, std::int64_t>> range;
  for (const auto& b : batches_)
    for (const auto& row : b->rows()) {
      // A scheduled row's id says nothing of where the ready rows are (it may be
      // far below them); its lock keeps other claims off it.
      if (row.scheduled) continue;
      if (!range) range.emplace(row.id, row.id);
      range->first = std::min(range->first, row.id);
      range->second = std::max(range->second, row.id);
    }
  return range;
}

std::optional<BatchPipeline::Clock::time_point> BatchPipeline::oldest_unconfirmed() const {
  std::optional<Clock::time_point> oldest;
  for (const auto& b : batches_) {
    const std::size_t row = b->tracker().oldest_outstanding();
    if (row == static_cast<std::size_t>(-1)) continue;
    const auto at = b->timeline().published_at(row);
    if (!oldest || at < *oldest) oldest = at;
  }
  return oldest;
}

void BatchPipeline::on_ack(std::uint64_t tag, bool multiple, Clock::time_point at) {
  for (auto& b : batches_) {
    acked_rows_.clear();
    b->tracker().on_ack(tag, multiple, &acked_rows_);
    for (const auto row : acked_rows_) b->timeline().acked(row, at);
  }
}

void BatchPipeline::on_nack(std::uint64_t tag, bool multiple, const std::string& reason) {
  for (auto& b : batches_) b->tracker().on_nack(tag, multiple, reason);
}

void BatchPipeline::on_return(const std::string& message_id, const std::string& reason) {
  for (auto& b : batches_) b->tracker().on_return(message_id, reason);
}

void BatchPipeline::lose_link(const Failure& failure) {
  for (auto& b : batches_) {
    b->lose_link(failure);
  }
}

void BatchPipeline::fail_outstanding(const Failure& failure, ConfirmTracker::Outcome outcome) {
  for (auto& b : batches_) b->tracker().fail_outstanding(failure, outcome);
}

std::vector<std::uint64_t> BatchPipeline::fail_published_before(Clock::time_point limit, const Failure& failure) {
  std::vector<std::uint64_t> all;
  for (auto& b : batches_) {
    const auto& timeline = b->timeline();
    const auto tags =
        b->tracker().fail_oldest_while([&](std::size_t row) { return timeline.published_at(row) <= limit; }, failure);
    all.insert(all.end(), tags.begin(), tags.end());
  }
  return all;
}

std::size_t BatchPipeline::suspect_outstanding() {
  std::size_t n = 0;
  for (auto& b : batches_) n += b->suspect_outstanding();
  return n;
}

}  // namespace relay
