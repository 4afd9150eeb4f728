// FailurePolicy: which failures are the message's own (an attempt, parked at
// max_attempts) and which the environment's (no attempt).
#include "policy/failure_policy.h"

#include <doctest/doctest.h>

#include <limits>

using relay::CloseBlame;
using relay::FailureCause;
using relay::FailurePolicy;
using relay::FailureReason;
using Outcome = relay::ConfirmTracker::Outcome;

TEST_CASE("channel closes a single message can provoke are blamed on a message") {
  for (int code : {311, 312, 313, 403, 404, 405, 406, 999})
    CHECK_MESSAGE(FailurePolicy::blame_channel_close(code) == CloseBlame::kMessage, code);
}

TEST_CASE("connection and server failures are nobody's attempt") {
  for (int code : {0, 320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541})
    CHECK_MESSAGE(FailurePolicy::blame_channel_close(code) == CloseBlame::kEnvironment, code);
}

TEST_CASE("a return, an undecodable row and a refused row each count as an attempt") {
  for (auto o : {Outcome::kReturned, Outcome::kInvalid, Outcome::kRefused}) {
    auto v = FailurePolicy::judge(o, FailureCause::kNone);
    CHECK(v.counts_as_attempt);
    CHECK_FALSE(v.retry_at_once);  // its own backoff
  }
  CHECK(FailurePolicy::judge(Outcome::kRefused, FailureCause::kNone).metric == FailureReason::kChannelClosed);
  CHECK(FailurePolicy::judge(Outcome::kInvalid, FailureCause::kNone).metric == FailureReason::kInvalid);
}

TEST_CASE("a row lost with the link is retried at once without an attempt") {
  auto lost = FailurePolicy::judge(Outcome::kFailed, FailureCause::kLinkLost);
  CHECK_FALSE(lost.counts_as_attempt);
  CHECK(lost.retry_at_once);
  CHECK(lost.metric == FailureReason::kConnectionLost);
  auto never_sent = FailurePolicy::judge(Outcome::kUnconfirmed, FailureCause::kNone);
  CHECK_FALSE(never_sent.counts_as_attempt);
  CHECK(FailurePolicy::judge(Outcome::kFailed, FailureCause::kConfirmTimeout).metric == FailureReason::kConfirmTimeout);
  CHECK(FailurePolicy::judge(Outcome::kFailed, FailureCause::kBrokerBlocked).metric == FailureReason::kBlocked);
}

TEST_CASE("a row lost to a server's channel close is no attempt but waits its backoff") {
  auto v = FailurePolicy::judge(Outcome::kEnvironment, FailureCause::kNone);
  CHECK_FALSE(v.counts_as_attempt);
  CHECK_FALSE(v.retry_at_once);
  CHECK(v.metric == FailureReason::kChannelClosed);
}

TEST_CASE("a nack (a quorum queue without a majority, a full queue) is no attempt but waits its backoff") {
  auto v = FailurePolicy::judge(Outcome::kNacked, FailureCause::kNone);
  CHECK_FALSE(v.counts_as_attempt);
  CHECK_FALSE(v.retry_at_once);
  CHECK(v.metric == FailureReason::kNack);
}

// The settle policy as one table: every outcome a published (or unpublishable) row
// can have, with the cause behind it, at the first try, the last but one and the last.
namespace {

using relay::CloseAction;
using relay::Settlement;
using Action = Settlement::Action;

struct Row {
  const char* outcome_and_cause;
  Outcome outcome;
  FailureCause cause;  // as the loop records it (its text is for people only)
  bool attempt;        // counts as an attempt of the row
  bool at_once;        // retried without waiting (only for no attempt)
  FailureReason metric;
};

const Row kTable[] = {
    // A nack carries no cause (no quorum majority, a full queue): the environment's.
    {"nack", Outcome::kNacked, FailureCause::kNone, false, false, FailureReason::kNack},
    {"return (unroutable)", Outcome::kReturned, FailureCause::kNone, true, false, FailureReason::kReturned},
    {"channel close by a message's code, row alone", Outcome::kRefused, FailureCause::kNone, true, false,
     FailureReason::kChannelClosed},
    {"channel close by a server's code", Outcome::kEnvironment, FailureCause::kNone, false, false,
     FailureReason::kChannelClosed},
    {"connection lost", Outcome::kFailed, FailureCause::kLinkLost, false, true, FailureReason::kConnectionLost},
    // Not at once: a row its queue never confirms would be claimed first again.
    {"confirm timeout", Outcome::kFailed, FailureCause::kConfirmTimeout, false, false, FailureReason::kConfirmTimeout},
    {"broker blocked (resource alarm)", Outcome::kFailed, FailureCause::kBrokerBlocked, false, true,
     FailureReason::kBlocked},
    {"never sent (link gone first)", Outcome::kUnconfirmed, FailureCause::kNone, false, true,
     FailureReason::kConnectionLost},
    // The batch's time limit (BatchDeadline): never sent, it is the next batch's at
    // once; sent and unconfirmed, the broker is slow: the growing backoff.
    {"withheld at the batch's time limit", Outcome::kUnconfirmed, FailureCause::kBatchWithheld, false, true,
     FailureReason::kBatchTimeLimit},
    {"unconfirmed at the batch's time limit", Outcome::kFailed, FailureCause::kBatchLate, false, false,
     FailureReason::kBatchTimeLimit},
    {"encode refusal", Outcome::kInvalid, FailureCause::kNone, true, false, FailureReason::kInvalid},
    {"decode failure", Outcome::kInvalid, FailureCause::kNone, true, false, FailureReason::kInvalid},
};

}  // namespace

TEST_CASE("settle: every outcome x cause counts as an attempt, parks or retries without one, as the table says") {
  constexpr int kMax = 5;
  for (const auto& row : kTable) {
    for (int attempts : {0, kMax - 2, kMax - 1}) {
      CAPTURE(row.outcome_and_cause);
      CAPTURE(attempts);
      const auto s = FailurePolicy::settle(row.outcome, row.cause, attempts, kMax);
      CHECK(s.verdict.counts_as_attempt == row.attempt);
      CHECK(FailurePolicy::waits_on_environment(row.outcome, row.cause) == (!row.attempt && !row.at_once));
      CHECK(s.verdict.metric == row.metric);
      if (row.attempt) {
        const bool last = attempts + 1 >= kMax;
        CHECK(s.action == (last ? Action::kPark : Action::kRetryAfterBackoff));
        CHECK(s.backoff_attempt == attempts + 1);  // its own backoff grows with its attempts
      } else if (row.at_once) {
        CHECK(s.action == Action::kRetryAtOnce);  // never parks, whatever the attempts so far
      } else {
        CHECK(s.action == Action::kRetryAfterBackoff);
        CHECK(s.backoff_attempt == 1);  // the environment's: the first step, not the row's count
        // ... and one step further at each failure of the environment's in a row.
        CHECK(FailurePolicy::settle(row.outcome, row.cause, attempts, kMax, 3).backoff_attempt == 4);
      }
    }
  }
}

TEST_CASE("settle: an acked row is marked published, whatever its attempts") {
  CHECK_FALSE(FailurePolicy::waits_on_environment(Outcome::kAcked, FailureCause::kNone));
  for (int attempts : {0, 4, 99})
    CHECK(FailurePolicy::settle(Outcome::kAcked, FailureCause::kNone, attempts, 5).action == Action::kMarkPublished);
}

TEST_CASE("settle: with max_attempts 1 a message's own failure parks at once, the environment's never") {
  for (const auto& row : kTable) {
    CAPTURE(row.outcome_and_cause);
    const auto s = FailurePolicy::settle(row.outcome, row.cause, 0, 1);
    CHECK((s.action == Action::kPark) == row.attempt);
  }
}

TEST_CASE("settle: attempts written by hand out of range count from 0 and park at max_attempts, never overflow") {
  // Before: INT_MAX + 1 (undefined behaviour), and from INT_MIN about 2^31 tries.
  const auto returned = [](int attempts) {
    return FailurePolicy::settle(Outcome::kReturned, FailureCause::kNone, attempts, 5);
  };
  CHECK(returned(std::numeric_limits<int>::min()).action == Action::kRetryAfterBackoff);
  CHECK(returned(std::numeric_limits<int>::min()).backoff_attempt == 1);
  CHECK(returned(-1).backoff_attempt == 1);
  CHECK(returned(std::numeric_limits<int>::max()).action == Action::kPark);
  CHECK(returned(std::numeric_limits<int>::max()).backoff_attempt == 5);
  CHECK(returned(3).backoff_attempt == 4);
  CHECK(returned(4).action == Action::kPark);
}

TEST_CASE("a channel close: the server's codes hold everything, a message's code charges, holds or isolates") {
  for (int code : {0, 320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541})
    for (std::size_t outstanding : {0, 1, 2, 64}) {
      CAPTURE(code);
      CAPTURE(outstanding);
      CHECK(FailurePolicy::on_channel_close(code, outstanding) == CloseAction::kHoldAll);
    }
  for (int code : {311, 312, 313, 403, 404, 405, 406}) {
    CAPTURE(code);
    CHECK(FailurePolicy::on_channel_close(code, 0) == CloseAction::kHoldIdle);
    CHECK(FailurePolicy::on_channel_close(code, 1) == CloseAction::kChargeSole);
    CHECK(FailurePolicy::on_channel_close(code, 2) == CloseAction::kIsolate);
    CHECK(FailurePolicy::on_channel_close(code, 64) == CloseAction::kIsolate);
  }
}

TEST_CASE("a connection the broker closed: a node going away holds everything, any other code is a message's") {
  // RabbitMQ 4.0 answers a 404 whose reply text it cannot cut (a long non-ASCII
  // exchange name) with connection.close 541: one row, the whole connection.
  for (int code : {0, 320})
    for (std::size_t outstanding : {0, 1, 2, 64}) {
      CAPTURE(code);
      CAPTURE(outstanding);
      CHECK(FailurePolicy::on_channel_close(code, outstanding, /*connection_level=*/true) == CloseAction::kHoldAll);
    }
  for (int code : {541, 501, 505, 404, 406}) {
    CAPTURE(code);
    CHECK(FailurePolicy::on_channel_close(code, 0, true) == CloseAction::kHoldIdle);
    CHECK(FailurePolicy::on_channel_close(code, 1, true) == CloseAction::kChargeSole);
    CHECK(FailurePolicy::on_channel_close(code, 2, true) == CloseAction::kIsolate);
  }
  // The same 541 on a channel stays the server's.
  CHECK(FailurePolicy::on_channel_close(541, 1) == CloseAction::kHoldAll);
}

TEST_CASE("settle: the environment's failures in a row wait a growing step, capped, never an attempt or a park") {
  const auto nacked = [](int streak) {
    return FailurePolicy::settle(Outcome::kNacked, FailureCause::kNone, 9, 10, streak);
  };
  CHECK(nacked(0).backoff_attempt == 1);
  CHECK(nacked(1).backoff_attempt == 2);
  CHECK(nacked(7).backoff_attempt == 8);
  CHECK(nacked(-5).backoff_attempt == 1);
  CHECK(nacked(std::numeric_limits<int>::max()).backoff_attempt == 64);
  CHECK(nacked(std::numeric_limits<int>::max()).action == Action::kRetryAfterBackoff);
  CHECK_FALSE(nacked(1000).verdict.counts_as_attempt);
  // A row's own failure keeps counting by its attempts, whatever the streak.
  CHECK(FailurePolicy::settle(Outcome::kReturned, FailureCause::kNone, 2, 10, 30).backoff_attempt == 3);
}

TEST_CASE("decisions follow the recorded cause, never the text: any wording of a failure settles the same") {
  using relay::ConfirmTracker;
  const std::string misleading[] = {"", "broker blocked publishing", "no broker confirm within 30 s",
                                    "not published: its batch reached its time limit", "refused by broker: 404"};
  const std::pair<FailureCause, Action> expected[] = {
      {FailureCause::kLinkLost, Action::kRetryAtOnce},
      {FailureCause::kBrokerBlocked, Action::kRetryAtOnce},
      {FailureCause::kConfirmTimeout, Action::kRetryAfterBackoff},
      {FailureCause::kBatchWithheld, Action::kRetryAtOnce},
      {FailureCause::kBatchLate, Action::kRetryAfterBackoff},
  };
  for (const auto& [cause, action] : expected)
    for (const auto& text : misleading) {
      CAPTURE(static_cast<int>(cause));
      CAPTURE(text);
      ConfirmTracker t;
      t.reset(1);
      t.on_published(0, 1, "m0");
      t.fail_outstanding({cause, text});
      CHECK(t.reason(0) == text);  // kept for last_error and the log
      const auto s = FailurePolicy::settle(t.outcome(0), t.cause(0), 0, 5);
      CHECK(s.action == action);
      CHECK_FALSE(s.verdict.counts_as_attempt);
    }
}
