#pragma once
// RetryTracker: failed tries per message id, shared by a runner's workers.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>

#include "outbox/message_id.h"

namespace outbox::detail {

// A requeued message may come back to any worker of the process, so the count is
// shared. Bounded: past `capacity` ids the smallest id goes first, which for UUIDv7
// ids is the oldest message. Thread-safe.
class RetryTracker {
 public:
  RetryTracker() = default;
  explicit RetryTracker(std::size_t capacity) : capacity_(capacity) {}

  int failures(const MessageId& id) const;
  // Records one more failed try and returns the total.
  int record_failure(const MessageId& id);
  void forget(const MessageId& id);
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<MessageId, int> failures_;
  std::size_t capacity_ = 100000;
};

// The wait before the next try after `failures` failed ones: `first`, doubling per
// failure, at most `max`. Pure.
std::chrono::milliseconds retry_backoff(std::chrono::milliseconds first, std::chrono::milliseconds max, int failures);

}  // namespace outbox::detail
