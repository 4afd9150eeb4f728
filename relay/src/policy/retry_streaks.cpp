#include "policy/retry_streaks.h"

#include <algorithm>

namespace relay {

int RetryStreaks::count_failure(std::int64_t row_id) {
  auto [it, fresh] = streaks_.try_emplace(row_id, 0);
  const int before = it->second;
  if (it->second < 1000) ++it->second;  // FailurePolicy caps the step far below
  if (!fresh) return before;
  order_.push_back(row_id);
  while (streaks_.size() > capacity_ && !order_.empty()) {
    streaks_.erase(order_.front());  // a no-op for ids forgotten already
    order_.pop_front();
  }
  if (order_.size() > 2 * std::max<std::size_t>(capacity_, 1)) {  // mostly forgotten ids: compact
    std::deque<std::int64_t> live;
    for (const auto id : order_)
      if (streaks_.count(id)) live.push_back(id);
    order_.swap(live);
  }
  return before;
}

}  // namespace relay
