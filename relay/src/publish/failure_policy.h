#pragma once
// FailurePolicy: whose fault a failed publish is: the message's own, or the
// environment's. The one place that decides what counts as an attempt.

#include <string>

#include "confirm_tracker.h"
#include "relay_metrics.h"

namespace relay {

// Who a channel close is blamed on, from its AMQP reply code.
enum class CloseBlame {
  // A code a single message can provoke (404 no exchange, 403 access refused, 406
  // precondition failed such as a message over max_message_size, 311/312/313, and
  // every other code that is not a connection or server failure): one of the
  // messages outstanding on the channel is at fault. Which one is found by
  // publishing them again one at a time (RelayLoop's isolation).
  kMessage,
  // A connection or server failure (320 connection forced, 402, 501-506, 530, 540,
  // 541 internal error): no message is at fault. Nobody's attempt; back off.
  kEnvironment,
};

// How one row that was not acked is settled.
struct Verdict {
  bool counts_as_attempt = false;  // an attempt of the row; parked at max_attempts
  FailureReason metric = FailureReason::kConnectionLost;
  // Retry at once (the row did nothing wrong and the link is back) or after the
  // row's backoff (its own failure, or an environment that needs time).
  bool retry_at_once = false;
};

// Pure functions, no state: thread-safe.
class FailurePolicy {
 public:
  static CloseBlame blame_channel_close(int reply_code);
  // A row's outcome after its batch settled, with the reason recorded for it.
  // REQUIRES: outcome != kAcked.
  static Verdict judge(ConfirmTracker::Outcome outcome, const std::string& reason);
  // The prefix of last_error for a row found guilty of closing the channel; the
  // relay publishes such a row alone the next time (RelayLoop::must_go_alone).
  static constexpr const char* kRefusedPrefix = "refused by broker: ";
};

}  // namespace relay
