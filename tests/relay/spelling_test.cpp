// Spelling: a mistyped configuration key is matched to the key it probably meant.
#include "config/spelling.h"

#include <doctest/doctest.h>

using relay::edit_distance;
using relay::nearest_name;

TEST_CASE("the edit distance counts insertions, deletions, substitutions and swapped neighbours") {
  CHECK(edit_distance("batch_size", "batch_size") == 0);
  CHECK(edit_distance("batch_sise", "batch_size") == 1);  // substitution
  CHECK(edit_distance("dns", "dsn") == 1);                // swap
  CHECK(edit_distance("batchsize", "batch_size") == 1);   // insertion
  CHECK(edit_distance("listen", "") == 6);
}

TEST_CASE("a misspelled key is matched to the one known key near it, and to none when nothing or two are near") {
  const std::vector<std::string> relay_keys = {"batch_size", "max_attempts", "poll_interval_ms", "listen", "lanes"};
  CHECK(nearest_name("batch_sise", relay_keys) == "batch_size");
  CHECK(nearest_name("max_attempt", relay_keys) == "max_attempts");
  CHECK(nearest_name("dns", {"dsn", "schema"}) == "dsn");
  CHECK_FALSE(nearest_name("compression", relay_keys).has_value());
  CHECK_FALSE(nearest_name("lane", {"lanes", "lane_"}).has_value());  // two at 1: no guess
  CHECK_FALSE(nearest_name("xy", {"ab"}).has_value());                // short names: 1 edit at most
}
