// BatchTimeline: a published row's stages from created_at to the relay's commit.
#include <doctest/doctest.h>

#include <numeric>

#include "publish/batch_timeline.h"

using relay::BatchTimeline;
using relay::LatencyStage;
using std::chrono::milliseconds;

namespace {

double at(const relay::RowStages& s, LatencyStage stage) { return s[static_cast<std::size_t>(stage)]; }

}  // namespace

TEST_CASE("a published row's five stages are its own intervals and add up to created_at -> commit") {
  BatchTimeline t;
  const BatchTimeline::Clock::time_point start{std::chrono::seconds(1000)};
  t.claim_started(start, 1700000000.0);
  t.claimed(2, start + milliseconds(2));
  t.published(1, start + milliseconds(5));
  t.acked(1, start + milliseconds(9));
  const auto commit = start + milliseconds(15);
  auto s = t.stages(1, 1700000000.0 - 0.040, commit);
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kQueued) == doctest::Approx(0.040));
  CHECK(at(*s, LatencyStage::kClaim) == doctest::Approx(0.002));
  CHECK(at(*s, LatencyStage::kPublish) == doctest::Approx(0.003));
  CHECK(at(*s, LatencyStage::kConfirm) == doctest::Approx(0.004));
  CHECK(at(*s, LatencyStage::kSettle) == doctest::Approx(0.006));
  CHECK(std::accumulate(s->begin(), s->end(), 0.0) == doctest::Approx(0.040 + 0.015));
}

TEST_CASE("a row never published, or not acked, has no stages; one published again counts from its last publish") {
  BatchTimeline t;
  const BatchTimeline::Clock::time_point start{std::chrono::seconds(1000)};
  t.claim_started(start, 1700000000.0);
  t.claimed(2, start + milliseconds(1));
  CHECK_FALSE(t.stages(0, 1699999999.0, start + milliseconds(5)));
  t.published(1, start + milliseconds(2));  // then the channel closes: no ack
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
  BatchTimeline t;
  const BatchTimeline::Clock::time_point start{std::chrono::seconds(1000)};
  t.claim_started(start, 1700000000.0);
  t.claimed(1, start + milliseconds(1));
  t.published(0, start + milliseconds(2));
  t.acked(0, start + milliseconds(3));
  auto s = t.stages(0, 1700000000.5, start + milliseconds(4));
  REQUIRE(s);
  CHECK(at(*s, LatencyStage::kQueued) == 0);
}

TEST_CASE("the stages are named as the metric's label values") {
  const char* names[] = {"queued", "claim", "publish", "confirm", "settle"};
  for (std::size_t i = 0; i < relay::kLatencyStages; ++i)
    CHECK(std::string(relay::latency_stage_name(static_cast<LatencyStage>(i))) == names[i]);
}
