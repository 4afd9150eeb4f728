#include "policy/failure_policy.h"

namespace relay {

CloseBlame FailurePolicy::blame_channel_close(int code) {
  switch (code) {
    case 0:    // no close frame: a socket error
    case 320:  // connection-forced (a node shutting down)
    case 402:  // invalid-path (vhost)
    case 501:  // frame-error
    case 502:  // syntax-error
    case 503:  // command-invalid
    case 504:  // channel-error
    case 505:  // unexpected-frame
    case 506:  // resource-error
    case 530:  // not-allowed
    case 540:  // not-implemented
    case 541:  // internal-error
      return CloseBlame::kEnvironment;
    default: return CloseBlame::kMessage;
  }
}

CloseBlame FailurePolicy::blame_connection_close(int code) {
  return code == 0 || code == 320 ? CloseBlame::kEnvironment : CloseBlame::kMessage;
}

CloseAction FailurePolicy::on_channel_close(int reply_code, std::size_t outstanding, bool connection_level) {
  const CloseBlame blame = connection_level ? blame_connection_close(reply_code) : blame_channel_close(reply_code);
  if (blame == CloseBlame::kEnvironment) return CloseAction::kHoldAll;
  if (outstanding == 0) return CloseAction::kHoldIdle;
  return outstanding == 1 ? CloseAction::kChargeSole : CloseAction::kIsolate;
}

Settlement FailurePolicy::settle(ConfirmTracker::Outcome outcome, FailureCause cause, int attempts, int max_attempts,
                                 int environment_streak) {
  using Action = Settlement::Action;
  if (outcome == ConfirmTracker::Outcome::kAcked) return {Action::kMarkPublished, {}, 0};
  const Verdict v = judge(outcome, cause);
  if (v.retry_at_once) return {Action::kRetryAtOnce, v, 0};
  if (!v.counts_as_attempt) {  // the environment's: a step per failure in a row, not the row's attempts
    const int step = environment_streak < 0 ? 1 : environment_streak >= 63 ? 64 : environment_streak + 1;
    return {Action::kRetryAfterBackoff, v, step};
  }
  // A row written by hand may carry any attempts: count from 0, never overflow.
  const int next = attempts < 0 ? 1 : attempts >= max_attempts ? max_attempts : attempts + 1;
  if (next >= max_attempts) return {Action::kPark, v, next};
  return {Action::kRetryAfterBackoff, v, next};
}

bool FailurePolicy::waits_on_environment(ConfirmTracker::Outcome outcome, FailureCause cause) {
  if (outcome == ConfirmTracker::Outcome::kAcked) return false;
  const Verdict v = judge(outcome, cause);
  return !v.counts_as_attempt && !v.retry_at_once;
}

Verdict FailurePolicy::judge(ConfirmTracker::Outcome outcome, FailureCause cause) {
  using Outcome = ConfirmTracker::Outcome;
  switch (outcome) {
    // A nack carries no cause. RabbitMQ sends one when a queue cannot take the
    // message now: a quorum queue without a majority of its members, a full queue
    // with overflow reject-publish, an internal queue error. None is the message's
    // fault and all of them heal, so it is no attempt: the row waits its backoff
    // (never at once: the queue is still unable) and is published again.
    case Outcome::kNacked: return {false, FailureReason::kNack, false};
    case Outcome::kReturned: return {true, FailureReason::kReturned, false};
    case Outcome::kInvalid: return {true, FailureReason::kInvalid, false};
    case Outcome::kRefused: return {true, FailureReason::kChannelClosed, false};
    case Outcome::kEnvironment: return {false, FailureReason::kChannelClosed, false};
    case Outcome::kAcked:
    case Outcome::kUnconfirmed:
    case Outcome::kFailed: break;
  }
  // Lost with the link, or never published: says nothing about the message.
  // Unconfirmed within amqp.confirm_timeout_ms: no attempt either, but not at once:
  // a queue that cannot confirm it (suspended, without a majority) would take it
  // again first in the next claim and hold up every batch behind it.
  // Cut by the batch's time limit: nobody's attempt. Never sent, it is simply
  // the next batch's; sent and unconfirmed, the broker is slow: a backoff.
  switch (cause) {
    case FailureCause::kBatchWithheld: return {false, FailureReason::kBatchTimeLimit, true};
    case FailureCause::kBatchLate: return {false, FailureReason::kBatchTimeLimit, false};
    case FailureCause::kConfirmTimeout: return {false, FailureReason::kConfirmTimeout, false};
    case FailureCause::kBrokerBlocked: return {false, FailureReason::kBlocked, true};
    case FailureCause::kLinkLost:
    case FailureCause::kNone: break;
  }
  return {false, FailureReason::kConnectionLost, true};
}

}  // namespace relay
