// BatchTimeline: a published row's stages from created_at to the relay's commit.
#include "metrics/batch_timeline.h"

#include <doctest/doctest.h>

#include <numeric>

using relay::BatchTimeline;
using relay::LatencyStage;
using std::chrono::milliseconds;

namespace {

double at(const relay::RowStages& s, LatencyStage stage) { return s[static_cast<std::size_t>(stage)]; }

const BatchTimeline::Clock::time_point start{std::chrono::seconds(1000)};
constexpr double kClaimUnix = 1700000000.0;  // the claim's start on the system clock

// A batch of `rows` whose claim ran from `start` for `claim_ms`; row `row` published
// `publish_ms` after `start`, and acked `ack_ms` after it (negative: not acked).
BatchTimeline timeline(std::size_t rows, int claim_ms, std::size_t row, int publish_ms, int ack_ms) {
  BatchTimeline t;
  t.claim_started(start, kClaimUnix);
  t.claimed(rows, start + milliseconds(claim_ms));
  t.published(row, start + milliseconds(publish_ms));
  if (ack_ms >= 0) t.acked(row, start + milliseconds(ack_ms));
  return t;
}

}  // namespace

TEST_CASE("a published row's five stages are its own intervals and add up to created_at -> commit") {
  const auto t = timeline(2, 2, 1, 5, 9);
  auto s = t.stages(1, kClaimUnix - 0.040, start + milliseconds(15));
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kQueued) == doctest::Approx(0.040));
  CHECK(at(*s, LatencyStage::kClaim) == doctest::Approx(0.002));
  CHECK(at(*s, LatencyStage::kPublish) == doctest::Approx(0.003));
  CHECK(at(*s, LatencyStage::kConfirm) == doctest::Approx(0.004));
  CHECK(at(*s, LatencyStage::kSettle) == doctest::Approx(0.006));
  CHECK(std::accumulate(s->begin(), s->end(), 0.0) == doctest::Approx(0.040 + 0.015));
}

TEST_CASE("a row never published, or not acked, has no stages; one published again counts from its last publish") {
  auto t = timeline(2, 1, 1, 2, -1);                                // row 1 published, then the channel closes: no ack
  CHECK_FALSE(t.stages(0, 1699999999.0, start + milliseconds(5)));  // row 0 never published
  CHECK_FALSE(t.stages(1, 1699999999.0, start + milliseconds(3)));
  t.published(1, start + milliseconds(4));  // published again (an isolation)
  t.acked(1, start + milliseconds(6));
  auto s = t.stages(1, 1699999999.0, start + milliseconds(7));
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kPublish) == doctest::Approx(0.003));
  CHECK(at(*s, LatencyStage::kConfirm) == doctest::Approx(0.002));
  CHECK(at(*s, LatencyStage::kSettle) == doctest::Approx(0.001));
}

TEST_CASE("a created_at ahead of the relay's clock (skew between hosts) counts as queued 0, not negative") {
  const auto t = timeline(1, 1, 0, 2, 3);
  auto s = t.stages(0, kClaimUnix + 0.5, start + milliseconds(4));
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kQueued) == 0);
}

TEST_CASE("a created_at before 1970 (a negative one) counts its whole age as queued") {
  const auto t = timeline(1, 1, 0, 2, 3);
  auto s = t.stages(0, -315619200.0, start + milliseconds(4));  // 1960-01-01
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kQueued) == doctest::Approx(kClaimUnix + 315619200.0));
  CHECK(at(*s, LatencyStage::kSettle) == doctest::Approx(0.001));
}

TEST_CASE("the stages are named as the metric's label values") {
  const char* names[] = {"queued", "claim", "publish", "confirm", "settle"};
  for (std::size_t i = 0; i < relay::kLatencyStages; ++i)
    CHECK(std::string(relay::latency_stage_name(static_cast<LatencyStage>(i))) == names[i]);
}
