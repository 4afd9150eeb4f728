#pragma once
// SetAsideQueue: failed messages a worker holds, unacked, until their retry is due.

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

#include "amqp_consumer.h"

namespace outbox::detail {

// RetryOrder::kSetAside: a message whose try failed waits here for its retry while
// the worker handles the next deliveries, instead of holding the worker for the
// wait. The broker still counts it as unacked, so the queue holds at most
// `capacity` (the worker's prefetch less one: a delivery slot stays free for new
// messages; when the queue is full a failed message waits in place, as with
// kHoldInOrder). Messages come out earliest due first.
//
// Pure data of one worker thread. Thread safety: none.
class SetAsideQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SetAsideQueue(std::size_t capacity) : capacity_(capacity) {}

  // False (and `message` untouched) when the queue is full.
  bool add(InboundMessage& message, Clock::time_point due);
  // The message due earliest, if it is due at `now`.
  std::optional<InboundMessage> take_due(Clock::time_point now);
  // How long the worker may wait for a delivery before the next message here is
  // due: `at_most` when none is, 0 when one is due already.
  std::chrono::milliseconds wait_before_next(Clock::time_point now, std::chrono::milliseconds at_most) const;
  // Everything held, emptying the queue (to requeue at a stop; after a lost
  // connection their delivery tags are void and the broker requeued them itself).
  std::vector<InboundMessage> take_all();

  std::size_t size() const { return held_.size(); }

 private:
  struct Held {
    Clock::time_point due;
    InboundMessage message;
  };
  std::size_t capacity_;
  std::vector<Held> held_;  // a few at most (prefetch - 1): a linear scan is enough
};

}  // namespace outbox::detail
