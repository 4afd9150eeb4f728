#include "policy/confirm_tracker.h"

#include <doctest/doctest.h>

#include "outbox/one_line.h"
#include "policy/backoff.h"

using relay::ConfirmTracker;
using Outcome = ConfirmTracker::Outcome;

namespace {

ConfirmTracker published(std::size_t n) {
  ConfirmTracker t;
  t.reset(n);
  for (std::size_t i = 0; i < n; ++i) t.on_published(i, i + 1, "m" + std::to_string(i));
  return t;
}

}  // namespace

TEST_CASE("a multiple ack settles every tag up to N and no further") {
  auto t = published(5);
  t.on_ack(3, true);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kAcked);
  CHECK(t.outcome(2) == Outcome::kAcked);
  CHECK(t.outcome(3) == Outcome::kUnconfirmed);
  CHECK(t.outstanding() == 2);
}

TEST_CASE("a single ack settles only its own tag, in any order") {
  auto t = published(3);
  t.on_ack(3, false);
  CHECK(t.outcome(2) == Outcome::kAcked);
  CHECK(t.outcome(0) == Outcome::kUnconfirmed);
  t.on_ack(1, false);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outstanding() == 1);
}

TEST_CASE("a nack leaves the row unpublished with the reason, multiple included") {
  auto t = published(4);
  t.on_nack(2, true, "nacked by broker");
  CHECK(t.outcome(0) == Outcome::kNacked);
  CHECK(t.outcome(1) == Outcome::kNacked);
  CHECK(t.reason(1) == "nacked by broker");
  t.on_ack(4, true);
  CHECK(t.outcome(0) == Outcome::kNacked);  // already settled tags are not re-settled
  CHECK(t.outcome(3) == Outcome::kAcked);
}

TEST_CASE("a returned message stays unpublished even though its ack follows") {
  auto t = published(2);
  t.on_return("m1", "returned by broker: 312 NO_ROUTE");
  t.on_ack(2, true);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kReturned);
  CHECK(t.reason(1) == "returned by broker: 312 NO_ROUTE");
}

TEST_CASE("acks for unknown or repeated tags change nothing") {
  auto t = published(2);
  t.on_ack(7, false);
  t.on_ack(1, false);
  t.on_ack(1, false);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kUnconfirmed);
}

TEST_CASE("a lost channel fails every outstanding row and keeps settled ones") {
  auto t = published(3);
  t.on_ack(1, false);
  t.fail_outstanding({relay::FailureCause::kLinkLost, "channel closed by broker: 404 NOT_FOUND"});
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kFailed);
  CHECK(t.outcome(2) == Outcome::kFailed);
  CHECK(t.outstanding() == 0);
}

TEST_CASE("rows never published stay unconfirmed") {
  ConfirmTracker t;
  t.reset(3);
  t.on_published(0, 1, "a");
  t.on_ack(1, false);
  CHECK(t.outcome(1) == Outcome::kUnconfirmed);
  CHECK(t.outcome(2) == Outcome::kUnconfirmed);
}

TEST_CASE("a row that could not be sent settles as invalid and leaves the tags of the others alone") {
  ConfirmTracker t;
  t.reset(3);
  t.on_published(0, 1, "m0");
  t.on_unpublishable(1, "routing key is 300 bytes");
  t.on_published(2, 2, "m2");  // the next row takes the next tag
  t.on_ack(2, true);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kInvalid);
  CHECK(t.reason(1) == "routing key is 300 bytes");
  CHECK(t.outcome(2) == Outcome::kAcked);
  CHECK(t.outstanding() == 0);
}

TEST_CASE("backoff grows by the factor, is capped, and jitters within 20 percent") {
  relay::RelaySettings s;
  s.backoff_initial_ms = 100;
  s.backoff_max_ms = 1000;
  s.backoff_factor = 3.0;
  relay::Backoff b(s);
  CHECK(b.base_ms(1) == doctest::Approx(100));
  CHECK(b.base_ms(2) == doctest::Approx(300));
  CHECK(b.base_ms(3) == doctest::Approx(900));
  CHECK(b.base_ms(4) == doctest::Approx(1000));
  for (int i = 0; i < 200; ++i) {
    auto d = b.delay(2).count();
    CHECK(d >= 240);
    CHECK(d <= 360);
    CHECK(b.delay(10).count() <= 1000);
  }
}

TEST_CASE("one_line escapes line breaks and control characters and caps length") {
  CHECK(outbox::one_line("a\nb\rc\x01") == "a\\nb\\rc\\x01");
  CHECK(outbox::one_line(std::string(2000, 'x'), 100).size() == 103);
  CHECK(outbox::one_line("connection refused\n\tIs the server running?\n") ==
        "connection refused\\n\\tIs the server running?");
}

TEST_CASE(
    "a channel close over one of several rows puts them all back as suspects, in row order, returned rows excepted") {
  auto t = published(5);
  t.on_ack(2, true);                  // rows 0 and 1 are safe
  t.on_return("m3", "312 NO_ROUTE");  // row 3 was returned; its ack never came
  auto suspects = t.take_outstanding();
  CHECK(suspects == std::vector<std::size_t>{2, 4});
  CHECK(t.outcome(2) == Outcome::kUnconfirmed);
  CHECK(t.outcome(3) == Outcome::kReturned);
  CHECK(t.outstanding() == 0);
  // Published again on the reopened channel, whose tags start at 1.
  t.on_published(2, 1, "m2");
  CHECK(t.sole_outstanding() == 2);
  t.on_ack(1, false);
  CHECK(t.outcome(2) == Outcome::kAcked);
  CHECK(t.outcome(0) == Outcome::kAcked);
}

TEST_CASE("the row outstanding alone when the channel closes is refused, and only it") {
  auto t = published(3);
  t.on_ack(2, true);
  CHECK(t.sole_outstanding() == 2);
  t.on_refused(2, "refused by broker: 406 PRECONDITION_FAILED");
  CHECK(t.outcome(2) == Outcome::kRefused);
  CHECK(t.outcome(1) == Outcome::kAcked);
  CHECK(t.outstanding() == 0);
  CHECK(t.sole_outstanding() == static_cast<std::size_t>(-1));
}

TEST_CASE("no sole row while two are outstanding") {
  auto t = published(2);
  CHECK(t.sole_outstanding() == static_cast<std::size_t>(-1));
}

TEST_CASE("outstanding rows lost to a server failure settle with the given outcome") {
  auto t = published(2);
  t.on_ack(1, false);
  t.fail_outstanding({relay::FailureCause::kNone, "541 INTERNAL_ERROR"}, Outcome::kEnvironment);
  CHECK(t.outcome(0) == Outcome::kAcked);
  CHECK(t.outcome(1) == Outcome::kEnvironment);
  CHECK(t.reason(1) == "541 INTERNAL_ERROR");
}

TEST_CASE("an ack hands back exactly the rows it settled, for their confirm timing") {
  auto t = published(5);
  std::vector<std::size_t> rows;
  t.on_ack(2, false, &rows);
  CHECK(rows == std::vector<std::size_t>{1});
  rows.clear();
  t.on_ack(4, true, &rows);  // tags 1, 3, 4: 2 is settled already
  CHECK(rows == std::vector<std::size_t>{0, 2, 3});
  rows.clear();
  t.on_ack(4, true, &rows);  // again: nothing left to settle
  CHECK(rows.empty());
}

TEST_CASE("overdue rows fail oldest tag first, the rest stay outstanding, and a late ack for them settles nothing") {
  auto t = published(5);
  t.on_ack(2, false);  // row 1 confirmed, row 0 stuck
  CHECK(t.oldest_outstanding() == 0);
  const auto tags = t.fail_oldest_while([](std::size_t row) { return row < 3; },
                                        {relay::FailureCause::kConfirmTimeout, "no broker confirm"});
  CHECK(tags == std::vector<std::uint64_t>{1, 3});  // rows 0 and 2: row 1 was no longer outstanding
  CHECK(t.outcome(0) == Outcome::kFailed);
  CHECK(t.reason(0) == "no broker confirm");
  CHECK(t.outcome(1) == Outcome::kAcked);
  CHECK(t.outcome(2) == Outcome::kFailed);
  CHECK(t.outstanding() == 2);
  CHECK(t.oldest_outstanding() == 3);
  t.on_ack(5, true);  // covers the failed tags too: they stay failed (published again later)
  CHECK(t.outcome(0) == Outcome::kFailed);
  CHECK(t.outcome(3) == Outcome::kAcked);
  CHECK(t.outcome(4) == Outcome::kAcked);
  CHECK(t.oldest_outstanding() == static_cast<std::size_t>(-1));
}

TEST_CASE("failing overdue rows stops at the first one still in time") {
  auto t = published(3);
  CHECK(t.fail_oldest_while([](std::size_t row) { return row != 0; }, {relay::FailureCause::kConfirmTimeout, "late"})
            .empty());
  CHECK(t.outstanding() == 3);
}

namespace {
// Rows 0..n-1 published with tags 1..n, row i carrying (i + 1) * 100 bytes.
ConfirmTracker published_with_bytes(std::size_t n) {
  ConfirmTracker t;
  t.reset(n);
  for (std::size_t i = 0; i < n; ++i) t.on_published(i, i + 1, "m" + std::to_string(i), (i + 1) * 100);
  return t;
}
}  // namespace

TEST_CASE("outstanding bytes count the payloads of the rows whose tags are not settled, however they settle") {
  auto t = published_with_bytes(6);  // 100 + 200 + ... + 600
  CHECK(t.outstanding_bytes() == 2100);
  t.on_ack(2, true);  // rows 0 and 1
  CHECK(t.outstanding_bytes() == 1800);
  t.on_nack(3, false, "rejected");  // row 2
  CHECK(t.outstanding_bytes() == 1500);
  t.on_return("m3", "NO_ROUTE");  // returned: still outstanding until its ack
  CHECK(t.outstanding_bytes() == 1500);
  t.on_ack(4, false);
  CHECK(t.outstanding_bytes() == 1100);
  t.fail_oldest_while([](std::size_t row) { return row == 4; },
                      {relay::FailureCause::kConfirmTimeout, "no broker confirm"});
  CHECK(t.outstanding_bytes() == 600);
  t.on_refused(5, "channel closed");
  CHECK(t.outstanding_bytes() == 0);
  CHECK(t.outstanding() == 0);
}

TEST_CASE("outstanding bytes are zero after the outstanding rows fail, are taken back, or the batch starts over") {
  auto failed = published_with_bytes(3);
  failed.fail_outstanding({relay::FailureCause::kLinkLost, "connection lost"});
  CHECK(failed.outstanding_bytes() == 0);
  auto taken = published_with_bytes(3);
  CHECK(taken.take_outstanding().size() == 3);
  CHECK(taken.outstanding_bytes() == 0);
  taken.on_published(1, 10, "m1", 200);  // published again, alone
  CHECK(taken.outstanding_bytes() == 200);
  taken.reset(2);
  CHECK(taken.outstanding_bytes() == 0);
}
