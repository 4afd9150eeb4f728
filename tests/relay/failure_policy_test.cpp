// FailurePolicy: which failures are the message's own (an attempt, parked at
// max_attempts) and which the environment's (no attempt).
#include <doctest/doctest.h>

#include "failure_policy.h"

using relay::CloseBlame;
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
    auto v = FailurePolicy::judge(o, "why");
    CHECK(v.counts_as_attempt);
    CHECK_FALSE(v.retry_at_once);  // its own backoff
  }
  CHECK(FailurePolicy::judge(Outcome::kRefused, "x").metric == FailureReason::kChannelClosed);
  CHECK(FailurePolicy::judge(Outcome::kInvalid, "x").metric == FailureReason::kInvalid);
}

TEST_CASE("a row lost with the link is retried at once without an attempt") {
  auto lost = FailurePolicy::judge(Outcome::kFailed, "connection to broker lost: socket closed");
  CHECK_FALSE(lost.counts_as_attempt);
  CHECK(lost.retry_at_once);
  CHECK(lost.metric == FailureReason::kConnectionLost);
  auto never_sent = FailurePolicy::judge(Outcome::kUnconfirmed, "");
  CHECK_FALSE(never_sent.counts_as_attempt);
  CHECK(FailurePolicy::judge(Outcome::kFailed, "no broker confirm within 30 s").metric ==
        FailureReason::kConfirmTimeout);
  CHECK(FailurePolicy::judge(Outcome::kFailed, "not confirmed: broker blocked publishing").metric ==
        FailureReason::kBlocked);
}

TEST_CASE("a row lost to a server's channel close is no attempt but waits its backoff") {
  auto v = FailurePolicy::judge(Outcome::kEnvironment, "channel closed by broker: 541 INTERNAL_ERROR");
  CHECK_FALSE(v.counts_as_attempt);
  CHECK_FALSE(v.retry_at_once);
  CHECK(v.metric == FailureReason::kChannelClosed);
}

TEST_CASE("a nack (a quorum queue without a majority, a full queue) is no attempt but waits its backoff") {
  auto v = FailurePolicy::judge(Outcome::kNacked, "nacked by broker");
  CHECK_FALSE(v.counts_as_attempt);
  CHECK_FALSE(v.retry_at_once);
  CHECK(v.metric == FailureReason::kNack);
}
