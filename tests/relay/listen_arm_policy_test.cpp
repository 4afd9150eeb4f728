// ListenArmPolicy: an armed relay keeps the waiting lock at a low rate and gives it
// back when it is busy.
#include "policy/listen_arm_policy.h"

#include <doctest/doctest.h>

using relay::ListenArmPolicy;
using std::chrono::milliseconds;

namespace {
const ListenArmPolicy::Clock::time_point t0 = ListenArmPolicy::Clock::now();
}

TEST_CASE("a relay that goes idle after every small batch, at 300 rows/s, keeps the lock") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 1000; ++i, now += milliseconds(10)) {
    CHECK_FALSE(policy.release_after_claim(3, now));  // a few rows, published
    CHECK_FALSE(policy.release_after_claim(0, now));  // the claim after the batch: nothing
  }
}

TEST_CASE("a relay that waits for a notification between batches keeps the lock, with no empty claim") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 1000; ++i, now += milliseconds(2)) {  // 500 rows/s
    CHECK_FALSE(policy.release_after_claim(1, now));
    policy.went_idle();
  }
}

TEST_CASE("claims that find rows back to back give the lock back once they reach the busy mark") {
  ListenArmPolicy policy;
  std::size_t rows = 0;
  auto now = t0;
  while (rows + 5 < ListenArmPolicy::kBusyRows) {
    CHECK_FALSE(policy.release_after_claim(5, now));
    rows += 5;
    now += milliseconds(5);
  }
  CHECK(policy.release_after_claim(5, now));  // the claim that reaches it
  CHECK(policy.release_after_claim(1, now));  // still busy: (re-armed or not) give it back
}

TEST_CASE("a claim of a whole backlog's batch gives the lock back at once") {
  ListenArmPolicy policy;
  CHECK(policy.release_after_claim(500, t0));
}

TEST_CASE("a claim that finds nothing, or a wait, starts the count since idle again") {
  ListenArmPolicy policy;
  CHECK_FALSE(policy.release_after_claim(ListenArmPolicy::kBusyRows - 1, t0));
  CHECK_FALSE(policy.release_after_claim(0, t0 + milliseconds(50)));
  CHECK_FALSE(policy.release_after_claim(ListenArmPolicy::kBusyRows - 1, t0 + milliseconds(100)));
  policy.went_idle();
  CHECK_FALSE(policy.release_after_claim(ListenArmPolicy::kBusyRows - 1, t0 + milliseconds(200)));
  CHECK(policy.release_after_claim(1, t0 + milliseconds(200)));
}

TEST_CASE("small batches with waits between them, at 2 000 rows/s, give the lock back within a window") {
  ListenArmPolicy policy;
  auto now = t0;
  bool released = false;
  int claims = 0;
  for (; claims < 1000 && !released; ++claims, now += milliseconds(1)) {  // 2 rows per ms: 2 000 rows/s
    released = policy.release_after_claim(2, now);
    policy.went_idle();
  }
  CHECK(released);
  CHECK(claims == static_cast<int>((ListenArmPolicy::kWindowRows + 1) / 2));  // within the first window
}

TEST_CASE("the rate is counted per window: 700 rows/s spread over windows stays under it") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 1000; ++i, now += milliseconds(10)) {  // 7 rows per 10 ms: 700 rows/s
    CHECK_FALSE(policy.release_after_claim(7, now));
    policy.went_idle();
  }
}

TEST_CASE("a relay that claimed 2 000 rows/s a moment ago polls when a claim finds nothing, not taking the lock") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 300; ++i, now += milliseconds(1)) {  // three windows at 2 rows per ms
    policy.release_after_claim(2, now);
    policy.went_idle();
  }
  // The claim that found nothing, just as a new window starts: the last one's rows count.
  policy.release_after_claim(0, now);
  CHECK(policy.poll_instead_of_arming(now));
  const auto last_rows = now - milliseconds(1);
  CHECK(policy.poll_instead_of_arming(last_rows + ListenArmPolicy::kBusyLinger - milliseconds(1)));
  CHECK_FALSE(policy.poll_instead_of_arming(last_rows + ListenArmPolicy::kBusyLinger));
}

TEST_CASE("a busy relay whose claims find nothing for the linger takes the lock again") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 100; ++i, now += milliseconds(1)) policy.release_after_claim(2, now);
  const auto last_rows = now - milliseconds(1);
  for (; now - last_rows < ListenArmPolicy::kBusyLinger; now += milliseconds(1)) {
    CHECK(policy.poll_instead_of_arming(now));
    policy.release_after_claim(0, now);
  }
  CHECK_FALSE(policy.poll_instead_of_arming(now));  // the rate ended: about 10 empty polls, then the lock
}

TEST_CASE("below 1 500 rows/s a relay takes the lock when it finds nothing: it never polls") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 1000; ++i, now += milliseconds(10)) {  // 14 rows per 10 ms: 1 400 rows/s
    policy.release_after_claim(14, now);
    policy.release_after_claim(0, now + milliseconds(1));
    CHECK_FALSE(policy.poll_instead_of_arming(now + milliseconds(1)));
  }
}

TEST_CASE("a failed claim ends the polling: the relay waits as an idle one does") {
  ListenArmPolicy policy;
  auto now = t0;
  for (int i = 0; i < 100; ++i, now += milliseconds(1)) policy.release_after_claim(2, now);
  CHECK(policy.poll_instead_of_arming(now));
  policy.cool_down();
  CHECK_FALSE(policy.poll_instead_of_arming(now));
}

TEST_CASE("a busy relay polls about as often as rows arrive, within its bounds") {
  auto polled_at = [](std::size_t rows_per_ms) {
    ListenArmPolicy policy;
    auto now = t0;
    for (int i = 0; i < 150; ++i, now += milliseconds(1)) policy.release_after_claim(rows_per_ms, now);
    return policy.busy_poll();
  };
  using std::chrono::microseconds;
  CHECK(polled_at(2) == microseconds(500));               // 2 000 rows/s
  CHECK(polled_at(4) == microseconds(250));               // 4 000 rows/s
  CHECK(polled_at(50) == ListenArmPolicy::kBusyPollMin);  // 50 000 rows/s: not a spin
}
