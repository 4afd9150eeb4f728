// ListenArmPolicy: an armed relay keeps the waiting lock at a low rate and gives it
// back when it is busy.
#include <doctest/doctest.h>

#include "publish/listen_arm_policy.h"

using relay::ListenArmPolicy;

TEST_CASE("a relay that goes idle after every small batch keeps the lock") {
  ListenArmPolicy policy;
  for (int i = 0; i < 1000; ++i) {
    CHECK_FALSE(policy.release_after_claim(3));  // a few rows, published
    CHECK_FALSE(policy.release_after_claim(0));  // the claim after the batch: nothing
  }
}

TEST_CASE("claims that find rows back to back give the lock back once they reach the busy mark") {
  ListenArmPolicy policy;
  std::size_t rows = 0;
  while (rows + 5 < ListenArmPolicy::kBusyRows) {
    CHECK_FALSE(policy.release_after_claim(5));
    rows += 5;
  }
  CHECK(policy.release_after_claim(5));  // the claim that reaches it
  CHECK(policy.release_after_claim(1));  // still busy: (re-armed or not) give it back
}

TEST_CASE("a claim of a whole backlog's batch gives the lock back at once") {
  ListenArmPolicy policy;
  CHECK(policy.release_after_claim(500));
}

TEST_CASE("a claim that finds nothing starts the count again") {
  ListenArmPolicy policy;
  CHECK_FALSE(policy.release_after_claim(ListenArmPolicy::kBusyRows - 1));
  CHECK_FALSE(policy.release_after_claim(0));
  CHECK_FALSE(policy.release_after_claim(ListenArmPolicy::kBusyRows - 1));
  CHECK(policy.release_after_claim(1));
}

TEST_CASE("a relay that waits for a notification between batches keeps the lock, with no empty claim") {
  ListenArmPolicy policy;
  for (int i = 0; i < 1000; ++i) {
    CHECK_FALSE(policy.release_after_claim(1));
    policy.went_idle();
  }
}
