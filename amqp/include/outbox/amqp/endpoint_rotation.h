#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// EndpointRotation: which broker node of a list to try next.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace outbox::amqp {

// How a client walks a list of broker endpoints (amqp.endpoint_order).
enum class EndpointOrder {
  kInOrder,   // "in_order": the list as written, first endpoint first
  kShuffled,  // "shuffled": a random order per round, so N clients spread over the nodes
};

// The order in which to try `count` endpoints. A round lists every endpoint once;
// next() hands them out one at a time (one connection attempt each; the caller
// backs off between failed attempts, so a dead node is never retried in a spin).
// After a connection was made, the next round starts afresh with the endpoint it
// used last (the node that dropped the connection is likely down) moved to the end.
// In order, a round is the list as written; shuffled, a fresh random permutation.
//
// Pure: no I/O, no clock. Thread safety: none (owned by one connection).
// REQUIRES: count >= 1.
class EndpointRotation {
 public:
  EndpointRotation(std::size_t count, EndpointOrder order, std::uint64_t seed);

  // The index of the endpoint to try now.
  std::size_t next();
  // The endpoint `index` (from next()) accepted the connection: the next call to
  // next() starts a new round, with `index` tried last.
  void connected(std::size_t index);
  std::size_t size() const { return count_; }

 private:
  void new_round();

  std::size_t count_;
  EndpointOrder order_;
  std::mt19937_64 rng_;
  std::vector<std::size_t> round_;
  std::size_t pos_ = 0;
  bool has_last_ = false;
  std::size_t last_ = 0;
};

}  // namespace outbox::amqp
