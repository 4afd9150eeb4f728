#include "loop/stall_watch.h"

#include <doctest/doctest.h>

using relay::StallWatch;
using namespace std::chrono_literals;

namespace {
const StallWatch::Clock::time_point t0{std::chrono::hours(1)};
}

TEST_CASE("no progress for stall_after is reported once as a stall naming the latest failure") {
  StallWatch w(60s, t0);
  CHECK_FALSE(w.check(false, t0 + 30s));
  w.failure("row 7: not publishable: header too long", t0 + 30s);
  CHECK_FALSE(w.check(false, t0 + 60s));  // not over yet
  const auto change = w.check(false, t0 + 61s);
  REQUIRE(change);
  CHECK(change->stalled);
  CHECK(change->why.find("none was published for over 60 s") != std::string::npos);
  CHECK(change->why.find("last failure (31 s ago): row 7: not publishable: header too long") != std::string::npos);
  CHECK(w.stalled());
  CHECK_FALSE(w.check(false, t0 + 120s));  // said once per stall
}

TEST_CASE("progress ends a stall once, with how long it lasted since the last progress") {
  StallWatch w(60s, t0);
  REQUIRE(w.check(false, t0 + 61s));
  w.progress(t0 + 100s);
  const auto change = w.check(false, t0 + 100s);
  REQUIRE(change);
  CHECK_FALSE(change->stalled);
  CHECK(change->lasted == 100s);
  CHECK_FALSE(w.check(false, t0 + 101s));
}

TEST_CASE("a stall with no failure recorded says so") {
  StallWatch w(10s, t0);
  const auto change = w.check(false, t0 + 11s);
  REQUIRE(change);
  CHECK(change->why.find("; no failure recorded") != std::string::npos);
}

TEST_CASE("a failure from before the last progress is not named as the stall's cause") {
  StallWatch w(10s, t0);
  w.failure("channel closed by broker: 404 NOT_FOUND", t0 + 1s);
  w.progress(t0 + 100s);  // rows published again since that failure
  const auto change = w.check(false, t0 + 111s);
  REQUIRE(change);
  CHECK(change->why.find("last failure (") == std::string::npos);
  CHECK(change->why.find("no failure since the last progress (the one before, 110 s ago: channel closed") !=
        std::string::npos);
  // A new failure during the stall is what reason() names from then on.
  w.failure("nacked by broker", t0 + 115s);
  CHECK(w.reason(t0 + 116s).find("last failure (1 s ago): nacked by broker") != std::string::npos);
}

TEST_CASE("an idle relay with nothing due is making progress: it never stalls") {
  StallWatch w(10s, t0);
  for (int s = 1; s < 100; ++s) CHECK_FALSE(w.check(true, t0 + std::chrono::seconds(s)));
  CHECK_FALSE(w.stalled());
}

TEST_CASE("a retry still to come keeps an idle relay from counting as progress until a second after it is due") {
  StallWatch w(10s, t0);
  w.retry_scheduled(t0 + 30s);
  w.retry_scheduled(t0 + 20s);  // an earlier one does not shorten the latest
  CHECK_FALSE(w.check(true, t0 + 5s));
  const auto change = w.check(true, t0 + 11s);  // idle, but a retry of its own is due later
  REQUIRE(change);
  CHECK(change->stalled);
  CHECK_FALSE(w.check(true, t0 + 31s));  // within the second of slack: still stalled
  const auto ended = w.check(true, t0 + 32s);
  REQUIRE(ended);
  CHECK_FALSE(ended->stalled);
}
