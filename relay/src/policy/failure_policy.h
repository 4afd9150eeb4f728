#pragma once
// FailurePolicy: whose fault a failed publish is: the message's own, or the
// environment's. The one place that decides what counts as an attempt.

#include <cstddef>
#include <string>

#include "policy/confirm_tracker.h"
#include "policy/failure_cause.h"

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

// What becomes of one row once its batch settled.
struct Settlement {
  enum class Action {
    kMarkPublished,      // acked for its own tag: marked published
    kRetryAtOnce,        // no attempt, due again at once (lost with the link, never sent)
    kRetryAfterBackoff,  // due again after backoff_attempt's delay (RelayLoop's Backoff)
    kPark,               // its own failure reached max_attempts: parked for an operator
  };
  Action action = Action::kRetryAtOnce;
  Verdict verdict;          // meaningless for kMarkPublished
  int backoff_attempt = 0;  // kRetryAfterBackoff: the attempt number whose delay applies
};

// What the relay does when the broker closes the channel, by the close's code and
// how many published rows were still unconfirmed on it.
enum class CloseAction {
  kHoldAll,     // nobody's fault: the outstanding rows fail kEnvironment; publishing pauses
  kHoldIdle,    // a message's kind of code with nothing outstanding: publishing pauses
  kChargeSole,  // exactly one row outstanding: it is at fault (kRefused, an attempt)
  kIsolate,     // several outstanding: publish them again in halving groups to find it
};

// Pure functions, no state: thread-safe.
class FailurePolicy {
 public:
  static CloseBlame blame_channel_close(int reply_code);
  // A close the broker sent on the whole connection (the publisher reconnected):
  // 320 connection-forced (a node going away) and 0 (no close frame) are the
  // environment's; any other code is blamed as a message's. RabbitMQ 4.0 closes the
  // connection with 541 INTERNAL_ERROR when a message's 404 reply text cannot be cut
  // to 255 bytes (a long non-ASCII exchange name): retried as the environment's, that
  // one row took the connection and every row outstanding on it down again and again.
  // A broker failing every message alike is then isolated down to lone rows that are
  // charged; parked rows are requeued by an operator (outbox-relay dead requeue).
  static CloseBlame blame_connection_close(int reply_code);
  // `connection_level`: the close ended the connection (BrokerEvent::connection_level).
  static CloseAction on_channel_close(int reply_code, std::size_t outstanding, bool connection_level = false);
  // A row's outcome after its batch settled, with the cause recorded for it (never
  // its text: rewording a message changes no decision).
  // REQUIRES: outcome != kAcked.
  static Verdict judge(ConfirmTracker::Outcome outcome, FailureCause cause);
  // The whole decision for one row: `attempts` is what the row had before this
  // publish, `max_attempts` is relay.max_attempts (>= 1). Any outcome, kAcked too.
  // `environment_streak`: how many times in a row before this one the row failed
  // for the environment's reasons (RetryStreaks); such a failure waits the next
  // step of the backoff, so a queue that keeps refusing (a full reject-publish
  // queue, a never-confirming one) is asked less and less often, never spun on.
  static Settlement settle(ConfirmTracker::Outcome outcome, FailureCause cause, int attempts, int max_attempts,
                           int environment_streak = 0);
  // Whether the row waits for the environment: not acked, no attempt, not at once
  // (a nack, a confirm timeout, a server's channel close): what RetryStreaks counts.
  static bool waits_on_environment(ConfirmTracker::Outcome outcome, FailureCause cause);
  // The start of last_error (text for people) for a row found guilty of closing the
  // channel. Whether it goes alone the next time is the column refused_by_broker
  // (FailedRow::refused_by_broker, Isolator::must_go_alone), never this text.
  static constexpr const char* kRefusedPrefix = "refused by broker: ";
};

}  // namespace relay
