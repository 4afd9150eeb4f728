#include <doctest/doctest.h>

#include <limits>

#include "publish/claim_floor.h"

using relay::ClaimFloor;

TEST_CASE("with nothing in flight every claim starts at the lowest pending id") {
  ClaimFloor floor(4);
  for (int i = 0; i < 10; ++i) CHECK(floor.next(std::nullopt) == ClaimFloor::kFromStart);
}

TEST_CASE("behind a batch in flight a claim starts after its highest id, and every 4th from the start") {
  ClaimFloor floor(4);
  CHECK(floor.next(500) == 501);
  CHECK(floor.next(1000) == 1001);
  CHECK(floor.next(1500) == 1501);
  // Rows below the floors (late commits, retries) are reached here.
  CHECK(floor.next(2000) == ClaimFloor::kFromStart);
  CHECK(floor.next(2500) == 2501);
}

TEST_CASE("a claim with nothing in flight starts the count of floored claims again") {
  ClaimFloor floor(3);
  CHECK(floor.next(10) == 11);
  CHECK(floor.next(std::nullopt) == ClaimFloor::kFromStart);
  CHECK(floor.next(20) == 21);
  CHECK(floor.next(30) == 31);
  CHECK(floor.next(40) == ClaimFloor::kFromStart);
}

TEST_CASE("full_every 1 (or less) means no floors at all") {
  for (int every : {1, 0, -3}) {
    ClaimFloor floor(every);
    for (int i = 0; i < 5; ++i) CHECK(floor.next(100 * i) == ClaimFloor::kFromStart);
  }
}

TEST_CASE("an id at the top of bigint gives no floor rather than an overflow") {
  ClaimFloor floor(4);
  CHECK(floor.next(std::numeric_limits<std::int64_t>::max()) == ClaimFloor::kFromStart);
  // Hand-written negative ids are still ids: the floor follows them.
  CHECK(floor.next(-42) == -41);
}
