#include "metrics/batch_timeline.h"

#include <algorithm>

namespace relay {

const char* latency_stage_name(LatencyStage stage) {
  static constexpr const char* kNames[kLatencyStages] = {"queued", "claim", "publish", "confirm", "settle"};
  return kNames[static_cast<std::size_t>(stage)];
}

void BatchTimeline::claim_started(Clock::time_point at, double unix_s) {
  claim_start_ = at;
  claim_start_unix_ = unix_s;
}

void BatchTimeline::claimed(std::size_t rows, Clock::time_point at) {
  claim_end_ = at;
  published_.assign(rows, Clock::time_point{});
  acked_.assign(rows, Clock::time_point{});
}

std::optional<RowStages> BatchTimeline::stages(std::size_t row, double created_unix,
                                               Clock::time_point committed) const {
  const auto published = published_[row], acked = acked_[row];
  if (published == Clock::time_point{} || acked < published) return std::nullopt;
  auto s = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  return RowStages{std::max(0.0, claim_start_unix_ - created_unix), s(claim_start_, claim_end_),
                   s(claim_end_, published), s(published, acked), s(acked, committed)};
}

}  // namespace relay
