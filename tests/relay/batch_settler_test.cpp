// BatchSettler and InflightBatch without servers: each row of a settled batch to its
// fate, and the batch's own publishing state, on the loop fakes' clock.
#include "loop/batch_settler.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "loop/inflight_batch.h"
#include "loop_fakes.h"
#include "outbox/metrics.h"

using relay::ConfirmTracker;
using relay::FailedRow;
using relay::Failure;
using relay::FailureCause;
using relay::InflightBatch;
using namespace std::chrono_literals;

namespace {

struct Settling {
  relaytest::ManualClock clock;
  relaytest::FakeBatchStore store;
  outbox::metrics::Registry registry;
  relay::RelayMetrics metrics{registry, "test"};
  relay::RelaySettings settings;
  relay::BatchSettler settler{settings, metrics, clock};

  std::unique_ptr<InflightBatch> batch(std::int64_t first, std::size_t n) {
    return std::make_unique<InflightBatch>(store, relaytest::rows(first, n), clock, clock.now(), 0.0);
  }
};

const FailedRow* failed_row(const relay::SettledBatch& s, std::int64_t id) {
  const auto it = std::find_if(s.failed.begin(), s.failed.end(), [&](const FailedRow& f) { return f.id == id; });
  return it == s.failed.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("a partly acked batch marks only its acked rows published; each other row fails as its cause says") {
  Settling t;
  auto b = t.batch(1, 5);
  auto& tr = b->tracker();
  for (std::size_t i = 0; i < 4; ++i) {
    tr.on_published(i, i + 1, b->rows()[i].message_id, 10);
    b->sent_next();
  }
  tr.on_ack(1, false);                                    // row 1: acked
  tr.on_nack(2, false, "nacked by the broker");           // row 2: the broker refused it
  tr.on_return("m3", "312 NO_ROUTE");                     // row 3: returned, then acked
  tr.on_ack(3, false);                                    //
  tr.fail_oldest_while([](std::size_t) { return true; },  // row 4: overdue while others confirmed
                       {FailureCause::kConfirmTimeout, "no broker confirm within amqp.confirm_timeout_ms"});
  b->withhold({FailureCause::kBatchWithheld, "not published: its batch reached its time limit"});  // row 5 unsent
  REQUIRE(b->settled());

  const auto s = t.settler.settle(*b, b->withheld());
  REQUIRE(s.acked.size() == 1);
  CHECK(s.acked[0]->id == 1);
  REQUIRE(s.failed.size() == 4);
  // A nack is the queue's state, not the message's: no attempt, but a backoff.
  REQUIRE(failed_row(s, 2));
  CHECK_FALSE(failed_row(s, 2)->counts_as_attempt);
  CHECK(failed_row(s, 2)->retry_in_ms > 0);
  // A return is the message's own (its routing): an attempt, and a backoff.
  REQUIRE(failed_row(s, 3));
  CHECK(failed_row(s, 3)->counts_as_attempt);
  CHECK(failed_row(s, 3)->retry_in_ms > 0);
  // A confirm timeout and a time limit are the environment's: nobody's attempt; the
  // unsent row is due at once.
  REQUIRE(failed_row(s, 4));
  CHECK_FALSE(failed_row(s, 4)->counts_as_attempt);
  CHECK(failed_row(s, 4)->error.find("amqp.confirm_timeout_ms") != std::string::npos);
  REQUIRE(failed_row(s, 5));
  CHECK_FALSE(failed_row(s, 5)->counts_as_attempt);
  CHECK(failed_row(s, 5)->error == "not published: its batch reached its time limit");
  CHECK(failed_row(s, 5)->retry_in_ms == 0);
  CHECK(s.parked == 0);
  REQUIRE(s.retry_due_until);
  CHECK(*s.retry_due_until > t.clock.now());
}

TEST_CASE("a row failing its last allowed attempt is parked, and a row the broker refused alone is flagged so") {
  Settling t;
  t.settings.max_attempts = 3;
  relay::BatchSettler settler{t.settings, t.metrics, t.clock};
  auto rows = relaytest::rows(1, 2);
  rows[0].attempts = 2;  // this failure is its third
  InflightBatch b(t.store, rows, t.clock, t.clock.now(), 0.0);
  b.tracker().on_published(0, 1, "m1", 10);
  b.sent_next();
  b.tracker().on_return("m1", "312 NO_ROUTE");  // its own fault: an attempt
  b.tracker().on_ack(1, false);
  b.tracker().on_published(1, 2, "m2", 10);
  b.sent_next();
  b.tracker().on_refused(1, "refused by broker: 406 PRECONDITION_FAILED");
  const auto s = settler.settle(b, {});
  CHECK(s.parked == 1);
  REQUIRE(failed_row(s, 1));
  CHECK(failed_row(s, 1)->counts_as_attempt);
  REQUIRE(failed_row(s, 2));
  CHECK(failed_row(s, 2)->refused_by_broker);
  CHECK_FALSE(failed_row(s, 1)->refused_by_broker);
}

TEST_CASE("the environment's failures of one row wait longer each time in a row, and a publish ends the streak") {
  Settling t;
  std::vector<std::int64_t> delays;
  for (int round = 0; round < 4; ++round) {
    auto b = t.batch(7, 1);
    b->tracker().on_published(0, 1, "m7", 10);
    b->sent_next();
    b->lose_link({FailureCause::kConfirmTimeout, "no broker confirm"});
    const auto s = t.settler.settle(*b, {});
    REQUIRE(s.failed.size() == 1);
    CHECK_FALSE(s.failed[0].counts_as_attempt);
    delays.push_back(s.failed[0].retry_in_ms);
  }
  // Jitter is +/-20 %: a doubling base still grows from the first to the last.
  CHECK(delays.back() > delays.front());
}

TEST_CASE("an inflight batch publishes in claim order, stops when told, and is settled only with no suspect left") {
  relaytest::ManualClock clock;
  relaytest::FakeBatchStore store;
  const auto started = clock.now();
  clock.advance(3ms);
  InflightBatch b(store, relaytest::rows(10, 3), clock, started, 0.0);
  CHECK(b.claim_ms() == doctest::Approx(3.0));
  CHECK(b.has_unsent());
  CHECK(b.next_unsent() == 0);
  b.unpublishable_next("column headers: not an object");  // its own fault; the rows behind go on
  CHECK(b.tracker().outcome(0) == ConfirmTracker::Outcome::kInvalid);
  b.tracker().on_published(1, 1, "m11", 10);
  b.sent_next();
  CHECK(b.next_unsent() == 2);
  CHECK_FALSE(b.settled());
  b.stop_publishing();  // row 12 stays pending, no attempt
  CHECK_FALSE(b.has_unsent());
  CHECK(b.published() == 2);
  CHECK_FALSE(b.settled());  // tag 1 outstanding
  CHECK(b.suspect_outstanding() == 1);
  CHECK(b.publishing());  // a suspect is left to probe
  CHECK_FALSE(b.settled());
  CHECK(b.next_suspect() == 1);
  b.pop_suspect();
  CHECK(b.settled());
  clock.advance(5s);
  b.session_used();
  CHECK(b.session_used_at() == clock.now());
}

TEST_CASE("an inflight batch's time limit withholds its unsent rows and hands its suspects back") {
  relaytest::ManualClock clock;
  relaytest::FakeBatchStore store;
  InflightBatch b(store, relaytest::rows(1, 4), clock, clock.now(), 0.0);
  b.tracker().on_published(0, 1, "m1", 10);
  b.sent_next();
  b.tracker().on_published(1, 2, "m2", 10);
  b.sent_next();
  b.suspect_outstanding();
  const auto suspects = b.withhold({FailureCause::kBatchWithheld, "time limit"});
  CHECK(suspects == std::deque<std::size_t>{0, 1});
  CHECK_FALSE(b.has_suspects());
  CHECK(b.publishing_done());
  CHECK(b.withheld().cause == FailureCause::kBatchWithheld);
  CHECK(b.settled());
}
