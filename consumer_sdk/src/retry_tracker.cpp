#include "retry_tracker.h"

#include <algorithm>

namespace outbox::detail {

int RetryTracker::failures(const MessageId& id) const {
  std::lock_guard lock(mutex_);
  auto it = failures_.find(id);
  return it == failures_.end() ? 0 : it->second;
}

int RetryTracker::record_failure(const MessageId& id) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = failures_.try_emplace(id, 0);
  if (inserted && failures_.size() > capacity_) {
    auto oldest = failures_.begin();
    if (oldest == it) ++oldest;
    failures_.erase(oldest);
  }
  return ++it->second;
}

void RetryTracker::forget(const MessageId& id) {
  std::lock_guard lock(mutex_);
  failures_.erase(id);
}

std::size_t RetryTracker::size() const {
  std::lock_guard lock(mutex_);
  return failures_.size();
}

std::chrono::milliseconds retry_backoff(std::chrono::milliseconds first, std::chrono::milliseconds max, int failures) {
  auto delay = first * (1LL << std::min(std::max(failures, 1) - 1, 20));
  return std::min<std::chrono::milliseconds>(delay, max);
}

}  // namespace outbox::detail
