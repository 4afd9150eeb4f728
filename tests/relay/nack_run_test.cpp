// NackRun: a run of nacks with no ack restarts the connection every kRunLength
// nacks, and an ack ends it.
#include "policy/nack_run.h"

#include <doctest/doctest.h>

#include "test_text.h"

using relay::NackRun;
using testenv::contains;
using namespace std::chrono_literals;

namespace {
const NackRun::Clock::time_point t0{std::chrono::hours(1)};
}

TEST_CASE("a few nacks among acks are the queue's business, not a run") {
  NackRun run;
  for (int i = 0; i < 100; ++i) {
    CHECK_FALSE(run.nacked(NackRun::kRunLength - 1, t0));
    run.acked();
  }
  CHECK_FALSE(run.nacking());
}

TEST_CASE("kRunLength nacks in a row restart the connection, and again every kRunLength after") {
  NackRun run;
  int restarts = 0;
  for (std::size_t i = 0; i < 3 * NackRun::kRunLength; ++i) restarts += run.nacked(1, t0 + i * 10ms) ? 1 : 0;
  CHECK(restarts == 3);
  CHECK(run.nacking());
  CHECK(run.in_row() == 3 * NackRun::kRunLength);
  const auto text = run.describe(t0 + 12s);
  CHECK_MESSAGE(contains(text, "nacked every publish for 12 s (96 in a row, 3 fresh connection(s))"), text);
  run.acked();
  CHECK_FALSE(run.nacking());
  CHECK(run.in_row() == 0);
}

TEST_CASE("a multiple nack counts every message it names") {
  NackRun run;
  CHECK(run.nacked(NackRun::kRunLength, t0));
  CHECK(run.nacking());
}
