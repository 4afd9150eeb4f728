#pragma once
// Failure: why a row was not published, as a cause that decisions read and a text
// that people read.

#include <string>
#include <utility>

namespace relay {

// What happened to a row that the broker did not ack, when the ConfirmTracker
// outcome alone does not say it (a row lost, late, blocked or withheld). The
// outcomes that name their cause (a nack, a return, a refusal, an invalid row, a
// server's channel close) need none: kNone.
enum class FailureCause {
  kNone,            // no cause recorded (acked, or the outcome says it all)
  kLinkLost,        // the connection or channel went before the row settled, or before it was sent
  kBrokerBlocked,   // the broker blocked publishing (a resource alarm): not read, or not sent
  kConfirmTimeout,  // no confirm within amqp.confirm_timeout_ms while the broker confirmed others
  kBatchWithheld,   // never published: its batch reached its time limit (BatchDeadline)
  kBatchLate,       // published, not confirmed before its batch's time limit
};

// Why a claimed row was not published, as the metrics count it (label `reason` of
// outbox_relay_publish_failures_total): FailurePolicy maps each outcome and cause to one.
enum class FailureReason {
  kNack,
  kReturned,
  kChannelClosed,
  kConnectionLost,
  kConfirmTimeout,
  kBlocked,
  kInvalid,
  kBatchTimeLimit,  // its batch ran out of time before the session's idle timeout (BatchDeadline)
};

// A cause and its text. FailurePolicy decides on `cause` only: `text` (last_error,
// the logs) can be reworded without changing whether a row is retried or parked.
struct Failure {
  FailureCause cause = FailureCause::kNone;
  std::string text;

  Failure() = default;
  Failure(FailureCause c, std::string t) : cause(c), text(std::move(t)) {}
};

}  // namespace relay
