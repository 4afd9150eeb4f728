#pragma once
// RetryStreaks: how many times in a row each row failed for the environment's reasons.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace relay {

// A nack (a full reject-publish queue, a quorum queue without a majority), a
// confirm timeout or a server's channel close is nobody's attempt: the row's
// `attempts` column stays as it is. Its retry must still wait longer each time,
// or a queue that refuses for minutes is asked thousands of times a second, and
// every retry is a copy in the other queues bound to the key. This remembers the
// streak per row id, in memory: a relay that restarts, or another relay that
// claims the row, starts again from the first step (a few fast retries, no more).
//
// Bounded: at most `capacity` rows; past that the row whose streak began first is
// forgotten. Pure bookkeeping, no I/O. Not thread-safe.
class RetryStreaks {
 public:
  explicit RetryStreaks(std::size_t capacity) : capacity_(capacity) {}

  // The row's streak before this failure (0: its first), then counts this one.
  int count_failure(std::int64_t row_id);
  // The row was published, charged an attempt or parked: its streak ends.
  void forget(std::int64_t row_id) {
    if (!streaks_.empty()) streaks_.erase(row_id);  // called for every published row: nothing to hash then
  }
  std::size_t size() const { return streaks_.size(); }

 private:
  std::size_t capacity_;
  std::unordered_map<std::int64_t, int> streaks_;
  // Row ids in the order their streaks began; ids forgotten since are skipped (and
  // dropped once the queue is twice the map, so it stays bounded too).
  std::deque<std::int64_t> order_;
};

}  // namespace relay
