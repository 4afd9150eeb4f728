#include "loop/publish_hold.h"

#include <doctest/doctest.h>

using relay::PublishHold;
using namespace std::chrono_literals;

namespace {
const PublishHold::Clock::time_point t0{std::chrono::hours(1)};

// 200 ms doubling, +/-20% jitter.
bool within_step(std::chrono::milliseconds d, int step) {
  const double base = 200.0 * (1 << (step - 1));
  return d.count() >= base * 0.8 - 1 && d.count() <= base * 1.2 + 1;
}
}  // namespace

TEST_CASE("nothing is held until a fault nobody is to blame for") {
  PublishHold h;
  CHECK_FALSE(h.held(t0));
}

TEST_CASE("channel closes in a row hold publishing longer each time, and an ack starts the streak over") {
  PublishHold h;
  const auto d1 = h.after_close(t0);
  CHECK(within_step(d1, 1));
  CHECK(h.held(t0 + d1 - 1ms));
  CHECK_FALSE(h.held(t0 + d1));
  CHECK(within_step(h.after_close(t0 + 1s), 2));
  CHECK(within_step(h.after_close(t0 + 2s), 3));
  h.acked();
  CHECK(within_step(h.after_close(t0 + 3s), 1));
}

TEST_CASE("rollbacks have a streak of their own, which a commit ends") {
  PublishHold h;
  CHECK(within_step(h.after_close(t0), 1));
  CHECK(within_step(h.after_rollback(t0), 1));  // not the closes' second step
  CHECK(within_step(h.after_rollback(t0), 2));
  h.acked();  // an ack does not end the rollbacks
  CHECK(within_step(h.after_rollback(t0), 3));
  h.committed();
  CHECK(within_step(h.after_rollback(t0), 1));
}

TEST_CASE("the hold is capped at 10 s however many faults in a row, and never shortened by a later one") {
  PublishHold h;
  std::chrono::milliseconds last{0};
  for (int i = 0; i < 40; ++i) last = h.after_close(t0);
  CHECK(last <= 12000ms);
  CHECK(last >= 8000ms);
  const auto until = h.until();
  h.acked();
  h.after_close(t0);  // a short hold now leaves the long one in force
  CHECK(h.until() == until);
}

TEST_CASE("nack runs hold longer each time but never over a second, and an ack starts them over") {
  PublishHold h;
  CHECK(within_step(h.after_nacks(t0), 1));
  CHECK(within_step(h.after_nacks(t0 + 1s), 2));
  std::chrono::milliseconds longest{0};
  for (int i = 0; i < 20; ++i) longest = std::max(longest, h.after_nacks(t0 + 2s));
  CHECK(longest == PublishHold::kNackHoldMax);
  h.acked();
  CHECK(within_step(h.after_nacks(t0 + 3s), 1));
}
