#include "loop/batch_pipeline.h"

#include <doctest/doctest.h>

#include <memory>

#include "loop_fakes.h"

using relay::BatchPipeline;
using relay::ConfirmTracker;
using relay::Failure;
using relay::FailureCause;
using relay::InflightBatch;
using namespace std::chrono_literals;

namespace {
const BatchPipeline::Clock::time_point t0{std::chrono::hours(1)};

relaytest::ManualClock clock;        // the batches' clock; the pipeline reads none
relaytest::FakeBatchStore no_store;  // the pipeline does no I/O

// A claimed batch of rows with ids first_id...
std::unique_ptr<InflightBatch> batch(std::int64_t first_id, std::size_t rows) {
  return std::make_unique<InflightBatch>(no_store, relaytest::rows(first_id, rows), clock, t0, 0.0);
}

void publish(InflightBatch& b, std::size_t row, std::uint64_t tag, BatchPipeline::Clock::time_point at,
             std::size_t bytes = 10) {
  b.tracker().on_published(row, tag, b.rows()[row].message_id, bytes);
  b.timeline().published(row, at);
}
}  // namespace

TEST_CASE("an ack settles each batch's own tags only, and a batch is taken once all of it is settled, oldest first") {
  BatchPipeline p;
  p.push(batch(1, 2));
  p.push(batch(3, 1));
  publish(p.front(), 0, 1, t0);
  publish(p.front(), 1, 2, t0);
  publish(p.back(), 0, 3, t0);
  for (auto& b : p) b->stop_publishing();
  CHECK(p.outstanding() == 3);
  CHECK(p.outstanding_bytes() == 30);
  p.on_ack(3, false, t0 + 1ms);  // the second batch's tag
  CHECK(p.front().tracker().outstanding() == 2);
  auto settled = p.take_settled();
  REQUIRE(settled);
  CHECK(settled->rows().front().id == 3);
  CHECK(settled->tracker().outcome(0) == ConfirmTracker::Outcome::kAcked);
  CHECK_FALSE(p.take_settled());  // the first still waits
  p.on_ack(2, true, t0 + 2ms);    // multiple: tags 1 and 2
  REQUIRE(p.take_settled());
  CHECK(p.empty());
}

TEST_CASE("a batch still publishing, or with suspects, is not settled") {
  BatchPipeline p;
  p.push(batch(1, 2));
  publish(p.front(), 0, 1, t0);
  p.on_ack(1, false, t0);
  CHECK_FALSE(p.take_settled());  // row 1 not yet published
  p.front().stop_publishing();
  publish(p.front(), 1, 2, t0);
  CHECK(p.suspect_outstanding() == 1);  // row 1 (tag 2) becomes a suspect
  CHECK(p.isolating());
  CHECK_FALSE(p.all_published());
  CHECK_FALSE(p.take_settled());
  p.front().drop_suspects();
  CHECK(p.all_published());
  CHECK(p.take_settled());
}

TEST_CASE("a lost link fails what is outstanding in every batch, stops their publishing and drops suspects") {
  BatchPipeline p;
  p.push(batch(1, 3));
  p.push(batch(4, 1));
  publish(p.front(), 0, 1, t0);
  publish(p.front(), 2, 2, t0);
  p.suspect_outstanding();  // rows 0 and 2 of the first batch become suspects
  publish(p.front(), 0, 3, t0);
  publish(p.back(), 0, 4, t0);
  p.lose_link({FailureCause::kLinkLost, "socket closed"});
  CHECK(p.outstanding() == 0);
  for (const auto& b : p) {
    CHECK(b->publishing_done());
    CHECK_FALSE(b->has_suspects());
  }
  CHECK(p.front().tracker().outcome(0) == ConfirmTracker::Outcome::kFailed);
  CHECK(p.front().tracker().cause(0) == FailureCause::kLinkLost);
  CHECK(p.front().tracker().outcome(1) == ConfirmTracker::Outcome::kUnconfirmed);  // never sent: stays pending
}

TEST_CASE("after a close over one of several rows, the outstanding rows go in front of the suspects, in order") {
  BatchPipeline p;
  p.push(batch(1, 5));
  auto& b = p.front();
  publish(b, 4, 1, t0);
  CHECK(p.suspect_outstanding() == 1);  // row 4 is a suspect already
  publish(b, 1, 2, t0);
  publish(b, 3, 3, t0);
  CHECK(p.suspect_outstanding() == 2);
  CHECK(p.outstanding() == 0);
  std::vector<std::size_t> order;
  for (; b.has_suspects(); b.pop_suspect()) order.push_back(b.next_suspect());
  CHECK(order == std::vector<std::size_t>{1, 3, 4});
}

TEST_CASE("the id range spans every row in flight, and there is none when nothing is") {
  BatchPipeline p;
  CHECK_FALSE(p.id_range());
  p.push(batch(10, 3));
  p.push(batch(4, 2));
  const auto range = p.id_range();
  REQUIRE(range);
  CHECK(range->first == 4);
  CHECK(range->second == 12);
}

TEST_CASE("the oldest unconfirmed publish is found across batches; overdue rows fail and return their tags") {
  BatchPipeline p;
  CHECK_FALSE(p.oldest_unconfirmed());
  p.push(batch(1, 2));
  p.push(batch(3, 1));
  publish(p.front(), 0, 1, t0 + 5s);
  publish(p.front(), 1, 2, t0 + 9s);
  publish(p.back(), 0, 3, t0 + 2s);
  REQUIRE(p.oldest_unconfirmed());
  CHECK(*p.oldest_unconfirmed() == t0 + 2s);
  const auto tags = p.fail_published_before(t0 + 5s, {FailureCause::kConfirmTimeout, "late"});
  CHECK(tags.size() == 2);  // tags 1 and 3; tag 2 is not overdue
  CHECK(p.outstanding() == 1);
  CHECK(p.back().tracker().cause(0) == FailureCause::kConfirmTimeout);
  CHECK(*p.oldest_unconfirmed() == t0 + 9s);
}

TEST_CASE("a nack and a return reach the batch that owns the row") {
  BatchPipeline p;
  p.push(batch(1, 1));
  p.push(batch(2, 1));
  publish(p.front(), 0, 1, t0);
  publish(p.back(), 0, 2, t0);
  p.on_nack(1, false, "quorum queue without a majority");
  p.on_return("m2", "NO_ROUTE");
  CHECK(p.front().tracker().outcome(0) == ConfirmTracker::Outcome::kNacked);
  CHECK(p.back().tracker().outcome(0) == ConfirmTracker::Outcome::kReturned);
}
