// SetAsideQueue: failed messages held until their retry is due, at most capacity of
// them, earliest due first.
#include "set_aside_queue.h"

#include <doctest/doctest.h>

using outbox::detail::InboundMessage;
using outbox::detail::SetAsideQueue;
using std::chrono::milliseconds;

namespace {
const SetAsideQueue::Clock::time_point t0 = SetAsideQueue::Clock::now();

InboundMessage message(std::uint64_t tag) {
  InboundMessage m;
  m.delivery_tag = tag;
  m.message_id = "id-" + std::to_string(tag);
  return m;
}
}  // namespace

TEST_CASE("a message set aside comes back only once it is due") {
  SetAsideQueue queue(3);
  auto m = message(1);
  REQUIRE(queue.add(m, t0 + milliseconds(100)));
  CHECK_FALSE(queue.take_due(t0 + milliseconds(99)).has_value());
  auto due = queue.take_due(t0 + milliseconds(100));
  REQUIRE(due.has_value());
  CHECK(due->delivery_tag == 1);
  CHECK(due->message_id == "id-1");
  CHECK(queue.size() == 0);
}

TEST_CASE("messages come back earliest due first, whatever order they were set aside in") {
  SetAsideQueue queue(3);
  auto a = message(1), b = message(2), c = message(3);
  queue.add(a, t0 + milliseconds(300));
  queue.add(b, t0 + milliseconds(100));
  queue.add(c, t0 + milliseconds(200));
  const auto later = t0 + milliseconds(1000);
  CHECK(queue.take_due(later)->delivery_tag == 2);
  CHECK(queue.take_due(later)->delivery_tag == 3);
  CHECK(queue.take_due(later)->delivery_tag == 1);
  CHECK_FALSE(queue.take_due(later).has_value());
}

TEST_CASE("a full queue refuses a message and leaves it with the caller") {
  SetAsideQueue queue(2);
  auto a = message(1), b = message(2), c = message(3);
  CHECK(queue.add(a, t0));
  CHECK(queue.add(b, t0));
  CHECK_FALSE(queue.add(c, t0));
  CHECK(c.delivery_tag == 3);
  CHECK(c.message_id == "id-3");  // not moved from
  CHECK(queue.size() == 2);
}

TEST_CASE("a queue of capacity 0 (kHoldInOrder) never holds a message") {
  SetAsideQueue queue(0);
  auto a = message(1);
  CHECK_FALSE(queue.add(a, t0));
}

TEST_CASE("the wait for a delivery ends when the next message set aside is due") {
  SetAsideQueue queue(3);
  CHECK(queue.wait_before_next(t0, milliseconds(200)) == milliseconds(200));
  auto a = message(1), b = message(2);
  queue.add(a, t0 + milliseconds(500));
  queue.add(b, t0 + std::chrono::microseconds(50'500));
  CHECK(queue.wait_before_next(t0, milliseconds(200)) == milliseconds(51));  // rounded up, never early
  CHECK(queue.wait_before_next(t0 + milliseconds(60), milliseconds(200)) == milliseconds(0));
}

TEST_CASE("take_all empties the queue and returns every message") {
  SetAsideQueue queue(3);
  auto a = message(1), b = message(2);
  queue.add(a, t0);
  queue.add(b, t0 + milliseconds(10));
  auto all = queue.take_all();
  CHECK(all.size() == 2);
  CHECK(queue.size() == 0);
  CHECK_FALSE(queue.take_due(t0 + milliseconds(100)).has_value());
}
