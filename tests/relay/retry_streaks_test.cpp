#include "policy/retry_streaks.h"

#include <doctest/doctest.h>

using relay::RetryStreaks;

TEST_CASE("a row's environment failures in a row are counted until it is forgotten") {
  RetryStreaks s(10);
  CHECK(s.count_failure(7) == 0);
  CHECK(s.count_failure(7) == 1);
  CHECK(s.count_failure(7) == 2);
  CHECK(s.count_failure(8) == 0);  // each row its own
  s.forget(7);                     // published, or charged an attempt
  CHECK(s.count_failure(7) == 0);
}

TEST_CASE("past its capacity the streak that began first is forgotten, and memory stays bounded") {
  RetryStreaks s(3);
  s.count_failure(1);
  s.count_failure(1);
  s.count_failure(2);
  s.count_failure(3);
  s.count_failure(4);  // row 1 goes
  CHECK(s.size() == 3);
  CHECK(s.count_failure(1) == 0);
  CHECK(s.count_failure(4) == 1);
  for (std::int64_t id = 100; id < 100000; ++id) {  // forgotten ids do not pile up
    s.count_failure(id);
    s.forget(id);
  }
  CHECK(s.size() <= 3);
}
