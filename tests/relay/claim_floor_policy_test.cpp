// ClaimFloorPolicy: claims behind batches in flight start above them only deep in a
// backlog, and even then one in four starts from the lowest id.
#include "policy/claim_floor_policy.h"

#include <doctest/doctest.h>

using relay::ClaimFloorPolicy;
using Start = ClaimFloorPolicy::Start;

namespace {
constexpr std::size_t kLimit = 500;

// Full claims until the policy counts the relay deep in a backlog.
void go_deep(ClaimFloorPolicy& policy) {
  for (int i = 0; i < ClaimFloorPolicy::kDeepAfter; ++i) {
    (void)policy.next_claim(true);
    policy.claimed(kLimit, kLimit);
  }
}
}  // namespace

TEST_CASE("a caught-up relay's claims never start above the batches in flight") {
  ClaimFloorPolicy policy;
  for (int i = 0; i < 100; ++i) {
    CHECK(policy.next_claim(true) == Start::kAroundRange);
    policy.claimed(8, kLimit);  // 5 000 msg/s: a few rows a claim
  }
}

TEST_CASE("a claim with nothing in flight starts from the lowest id, deep in a backlog or not") {
  ClaimFloorPolicy policy;
  go_deep(policy);
  CHECK(policy.next_claim(false) == Start::kLowest);
}

TEST_CASE("deep in a backlog three claims in four start above the range, the fourth from the lowest id") {
  ClaimFloorPolicy policy;
  go_deep(policy);
  for (int round = 0; round < 5; ++round) {
    for (int i = 1; i < ClaimFloorPolicy::kFromLowestEvery; ++i) {
      CHECK(policy.next_claim(true) == Start::kAboveRange);
      policy.claimed(kLimit, kLimit);
    }
    CHECK(policy.next_claim(true) == Start::kAroundRange);
    policy.claimed(kLimit, kLimit);
  }
}

TEST_CASE("one claim that is not full ends the backlog: the next claims go around the range again") {
  ClaimFloorPolicy policy;
  go_deep(policy);
  CHECK(policy.next_claim(true) == Start::kAboveRange);
  policy.claimed(120, kLimit);
  for (int i = 0; i < ClaimFloorPolicy::kDeepAfter; ++i) {
    CHECK(policy.next_claim(true) == Start::kAroundRange);
    policy.claimed(kLimit, kLimit);
  }
  CHECK(policy.next_claim(true) == Start::kAboveRange);
}

TEST_CASE("a failed claim (no rows) ends the backlog") {
  ClaimFloorPolicy policy;
  go_deep(policy);
  policy.claimed(0, kLimit);
  CHECK(policy.next_claim(true) == Start::kAroundRange);
}

TEST_CASE("a claim from the lowest id with nothing in flight restarts the count to the next one") {
  ClaimFloorPolicy policy;
  go_deep(policy);
  CHECK(policy.next_claim(true) == Start::kAboveRange);
  CHECK(policy.next_claim(false) == Start::kLowest);
  policy.claimed(kLimit, kLimit);
  for (int i = 1; i < ClaimFloorPolicy::kFromLowestEvery; ++i) CHECK(policy.next_claim(true) == Start::kAboveRange);
  CHECK(policy.next_claim(true) == Start::kAroundRange);
}
