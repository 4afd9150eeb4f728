// HttpConnectionCap: the endpoint's choice of the connection to shed at the cap.
#include "ops/http_connection_cap.h"

#include <doctest/doctest.h>

#include <stdexcept>

using relay::HttpConnectionCap;
using Phase = HttpConnectionCap::Phase;

TEST_CASE("there is no victim while the cap has room") {
  HttpConnectionCap cap(3);
  CHECK_FALSE(cap.victim());
  cap.add();
  cap.add();
  CHECK_FALSE(cap.victim());
  cap.add();
  CHECK(cap.victim());
}

TEST_CASE("at the cap the keep-alive connection idle the longest is shed, though others are older") {
  HttpConnectionCap cap(4);
  auto reading = cap.add();
  auto fresh = cap.add();
  auto idle_old = cap.add();
  auto idle_new = cap.add();
  cap.enter(reading, Phase::reading);
  cap.enter(idle_old, Phase::idle);
  cap.enter(idle_new, Phase::idle);
  CHECK(cap.victim() == idle_old);
  cap.remove(idle_old);
  CHECK_FALSE(cap.victim());
  cap.add();
  CHECK(cap.victim() == idle_new);
  (void)fresh;
}

TEST_CASE("with no idle connection the one that has had the longest to send its request is shed") {
  HttpConnectionCap cap(3);
  auto slow = cap.add();
  cap.enter(slow, Phase::reading);  // a slowloris: one byte, then nothing
  auto probe = cap.add();           // fresh: its request is in flight
  auto newer = cap.add();
  CHECK(cap.victim() == slow);  // not the probe, though it sent nothing yet
  cap.remove(slow);
  cap.add();
  CHECK(cap.victim() == probe);
  cap.enter(probe, Phase::reading);  // now the newest in its tier
  CHECK(cap.victim() == newer);
}

TEST_CASE("a connection stuck writing is shed before a fresh one, the oldest first; an idle one before both") {
  HttpConnectionCap cap(4);
  auto a = cap.add();
  auto b = cap.add();
  cap.enter(a, Phase::writing);  // clients that do not read their responses
  cap.enter(b, Phase::writing);
  auto slow = cap.add();
  cap.enter(slow, Phase::reading);
  auto probe = cap.add();  // fresh: just accepted, its request in flight
  CHECK(cap.victim() == a);
  cap.enter(a, Phase::idle);
  CHECK(cap.victim() == a);  // idle goes first
  cap.remove(a);
  cap.add();
  CHECK(cap.victim() == b);
  cap.remove(b);
  cap.add();
  CHECK(cap.victim() == slow);  // then those with no whole request yet, the probe last
  (void)probe;
}

TEST_CASE("a new connection always fits: shedding the victim makes room, whatever the others do") {
  HttpConnectionCap cap(2);
  for (int i = 0; i < 100; ++i) {
    if (auto v = cap.victim()) cap.remove(*v);
    auto id = cap.add();
    cap.enter(id, i % 3 == 0 ? Phase::reading : i % 3 == 1 ? Phase::writing : Phase::idle);
    CHECK(cap.size() <= 2);
  }
  CHECK(cap.size() == 2);
}

TEST_CASE("removing twice or an unknown id is harmless; adding past the cap is refused") {
  HttpConnectionCap cap(1);
  auto id = cap.add();
  CHECK_THROWS_AS(cap.add(), std::logic_error);
  cap.remove(id);
  cap.remove(id);
  cap.remove(12345);
  CHECK(cap.size() == 0);
  CHECK_THROWS_AS(HttpConnectionCap(0), std::invalid_argument);
}
