#include "loop/isolator.h"

#include <doctest/doctest.h>

using relay::ClaimedRow;
using relay::Isolator;
using namespace std::chrono_literals;

namespace {
const Isolator::Clock::time_point t0{std::chrono::hours(1)};

ClaimedRow row(std::int64_t id, const std::string& exchange) {
  ClaimedRow r;
  r.id = id;
  r.exchange = exchange;
  return r;
}
}  // namespace

TEST_CASE("rows go together unless one was refused by the broker before") {
  Isolator iso;
  auto a = row(1, "orders");
  CHECK_FALSE(iso.must_go_alone(a, t0));
  a.refused_before = true;
  CHECK(iso.must_go_alone(a, t0));
}

TEST_CASE("rows bound for an exchange the broker refused lately go alone for 30 s, then together again") {
  Isolator iso;
  iso.exchange_refused("missing", t0);
  auto a = row(1, "missing");
  CHECK(iso.must_go_alone(a, t0 + 10s));
  CHECK(a.refused_before);  // its batch publishes it as one refused before
  auto other = row(2, "orders");
  CHECK_FALSE(iso.must_go_alone(other, t0 + 10s));
  auto later = row(3, "missing");
  CHECK(iso.must_go_alone(later, t0 + 30s));
  auto expired = row(4, "missing");
  CHECK_FALSE(iso.must_go_alone(expired, t0 + 31s));  // perhaps declared since
  CHECK_FALSE(expired.refused_before);
}

TEST_CASE("a suspect of an isolation cut short goes alone for 30 s") {
  Isolator iso;
  iso.isolation_cut_short(42, t0);
  auto suspect = row(42, "orders");
  CHECK(iso.must_go_alone(suspect, t0 + 29s));
  auto again = row(42, "orders");
  CHECK_FALSE(iso.must_go_alone(again, t0 + 31s));
}

TEST_CASE("the go-alone memory is bounded: past 1024 entries it starts again") {
  Isolator iso;
  for (std::int64_t id = 0; id < static_cast<std::int64_t>(Isolator::kMaxRemembered); ++id)
    iso.isolation_cut_short(id, t0);
  auto first = row(0, "x");
  CHECK(iso.must_go_alone(first, t0));
  iso.isolation_cut_short(5000, t0);  // the 1025th: the memory starts again
  auto forgotten = row(1, "x");
  CHECK_FALSE(iso.must_go_alone(forgotten, t0));
  auto newest = row(5000, "x");
  CHECK(iso.must_go_alone(newest, t0));
}

TEST_CASE("probe groups halve at each close, rounding up, and a row that goes alone makes a group of one") {
  Isolator iso;
  CHECK(iso.probe_size() == 1);
  iso.split(100);
  CHECK(iso.probe_size() == 50);
  iso.split(7);
  CHECK(iso.probe_size() == 4);
  iso.split(1);
  CHECK(iso.probe_size() == 1);
  iso.split(9);
  iso.alone();
  CHECK(iso.probe_size() == 1);
}

TEST_CASE("a refusal is news once per run of the same reason") {
  Isolator iso;
  CHECK(iso.new_refusal("NOT_FOUND - no exchange 'a'"));
  CHECK_FALSE(iso.new_refusal("NOT_FOUND - no exchange 'a'"));
  CHECK(iso.new_refusal("NOT_FOUND - no exchange 'b'"));
  CHECK(iso.new_refusal("NOT_FOUND - no exchange 'a'"));
}
