#include "loop/reconnect_supervisor.h"

#include <doctest/doctest.h>

using relay::ReconnectSupervisor;
using namespace std::chrono_literals;

namespace {
const ReconnectSupervisor::Clock::time_point t0{std::chrono::hours(1)};
}

TEST_CASE("the first connection says 'connected to', with no wait before it") {
  ReconnectSupervisor r;
  CHECK(r.before_attempt(t0) == 0ms);
  CHECK(r.connected("PostgreSQL a and AMQP b", t0) == "connected to PostgreSQL a and AMQP b");
}

TEST_CASE("failed attempts wait a growing backoff, and each distinct error warns once per outage") {
  ReconnectSupervisor r;
  const auto a = r.failed("PostgreSQL: connection refused", t0);
  CHECK(a.first_of_its_kind);
  CHECK(a.wait >= 160ms);
  CHECK(a.wait <= 240ms);
  const auto b = r.failed("PostgreSQL: connection refused", t0);
  CHECK_FALSE(b.first_of_its_kind);  // a repeat: debug
  CHECK(b.wait >= 320ms);
  CHECK(r.failed("AMQP: certificate verify failed", t0).first_of_its_kind);  // a new one still shows
  CHECK(r.failed_attempts() == 3);
  CHECK(r.connected("PostgreSQL a and AMQP b", t0) ==
        "connected again to PostgreSQL a and AMQP b after 3 failed attempt(s)");
  CHECK(r.failed_attempts() == 0);
  CHECK(r.failed("PostgreSQL: connection refused", t0).first_of_its_kind);  // a new outage
}

TEST_CASE("at most 8 distinct errors warn in one outage, however many a peer invents") {
  ReconnectSupervisor r;
  int warned = 0;
  for (int i = 0; i < 50; ++i) warned += r.failed("error " + std::to_string(i), t0).first_of_its_kind ? 1 : 0;
  CHECK(warned == 8);
}

TEST_CASE("a cause that may pass retries at least every second, so a server back is found within 1 s") {
  ReconnectSupervisor r;
  std::chrono::milliseconds longest{0};
  for (int i = 0; i < 30; ++i) longest = std::max(longest, r.failed("PostgreSQL: connection refused", t0).wait);
  CHECK(longest <= 1000ms);
  CHECK(longest >= 800ms);  // it does grow to the cap: no hammering
}

TEST_CASE("a permanent cause (a wrong password) backs off further, to at most 10 s") {
  ReconnectSupervisor r;
  std::chrono::milliseconds longest{0};
  for (int i = 0; i < 30; ++i) longest = std::max(longest, r.failed("password refused", t0, true).wait);
  CHECK(longest > 2000ms);
  CHECK(longest <= 10000ms);
}

TEST_CASE("a connection lost within a second of being made waits before the next attempt; one that lasted does not") {
  ReconnectSupervisor r;
  r.connected("x", t0);
  const auto first = r.before_attempt(t0 + 100ms);
  CHECK(first >= 160ms);
  r.connected("x", t0 + 1s);
  CHECK(r.before_attempt(t0 + 1100ms) > first);  // again at once: longer
  r.connected("x", t0 + 2s);
  CHECK(r.before_attempt(t0 + 5s) == 0ms);  // it lasted: no wait, the streak ends
  r.connected("x", t0 + 6s);
  const auto again = r.before_attempt(t0 + 6100ms);
  CHECK(again >= 160ms);
  CHECK(again <= 240ms);
}

TEST_CASE("an error that does not go away warns again every 30 s of its outage, not only once") {
  ReconnectSupervisor r;
  CHECK(r.failed("PostgreSQL: password authentication failed", t0).first_of_its_kind);
  const auto soon = r.failed("PostgreSQL: password authentication failed", t0 + 10s);
  CHECK_FALSE(soon.first_of_its_kind);
  CHECK_FALSE(soon.repeat_due);  // debug
  const auto later = r.failed("PostgreSQL: password authentication failed", t0 + 31s);
  CHECK(later.repeat_due);
  CHECK(later.outage_for == 31s);
  CHECK_FALSE(r.failed("PostgreSQL: password authentication failed", t0 + 40s).repeat_due);
  CHECK(r.failed("PostgreSQL: password authentication failed", t0 + 62s).repeat_due);
}
