// EndpointRotation: the order in which a client tries the nodes of a broker cluster.
#include "outbox/amqp/endpoint_rotation.h"

#include <doctest/doctest.h>

#include <set>
#include <vector>

using outbox::amqp::EndpointOrder;
using outbox::amqp::EndpointRotation;

namespace {

std::vector<std::size_t> take(EndpointRotation& r, int n) {
  std::vector<std::size_t> out;
  for (int i = 0; i < n; ++i) out.push_back(r.next());
  return out;
}

}  // namespace

TEST_CASE("in order, failed attempts walk the list as written and wrap around") {
  EndpointRotation r(3, EndpointOrder::kInOrder, 1);
  CHECK(take(r, 7) == std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0});
}

TEST_CASE("after a lost connection the node that was in use is tried last") {
  EndpointRotation r(3, EndpointOrder::kInOrder, 1);
  CHECK(r.next() == 0);
  r.connected(0);
  CHECK(take(r, 3) == std::vector<std::size_t>{1, 2, 0});
  r.connected(0);  // node 0 came back and took the connection again
  r.connected(2);
  CHECK(take(r, 3) == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("a connection made mid-round starts the next round afresh") {
  EndpointRotation r(3, EndpointOrder::kInOrder, 1);
  CHECK(r.next() == 0);  // refused
  CHECK(r.next() == 1);
  r.connected(1);
  CHECK(take(r, 3) == std::vector<std::size_t>{0, 2, 1});
}

TEST_CASE("one endpoint is always the one tried") {
  EndpointRotation r(1, EndpointOrder::kShuffled, 7);
  r.connected(r.next());
  CHECK(take(r, 3) == std::vector<std::size_t>{0, 0, 0});
}

TEST_CASE("shuffled, every round tries every endpoint exactly once") {
  EndpointRotation r(5, EndpointOrder::kShuffled, 42);
  for (int round = 0; round < 20; ++round) {
    auto got = take(r, 5);
    CHECK(std::set<std::size_t>(got.begin(), got.end()).size() == 5);
  }
}

TEST_CASE("shuffled, clients with different seeds spread over the nodes") {
  std::set<std::size_t> firsts;
  for (std::uint64_t seed = 1; seed <= 30; ++seed)
    firsts.insert(EndpointRotation(3, EndpointOrder::kShuffled, seed).next());
  CHECK(firsts.size() == 3);
}

TEST_CASE("shuffled, the node just lost is still tried last") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    EndpointRotation r(4, EndpointOrder::kShuffled, seed);
    std::size_t used = r.next();
    r.connected(used);
    auto round = take(r, 4);
    CHECK(round.back() == used);
    CHECK(std::set<std::size_t>(round.begin(), round.end()).size() == 4);
  }
}
