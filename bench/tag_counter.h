#pragma once
// TagCounter: which delivery tags of a confirm-mode channel the broker settled.

#include <cstdint>
#include <vector>

#include "amqp_bench_client.h"

namespace bench {

// Counts settled delivery tags of one channel (tags from 1, one published() per
// publish), with multiple acks and acks out of order; nacks count as settled.
// Thread safety: none.
class TagCounter {
 public:
  void published() { done_.push_back(false); }
  void settle(const AmqpBenchClient::Confirm& c) {
    if (c.nacked) ++nacked_;
    if (c.multiple) {
      for (std::uint64_t t = low_ + 1; t <= c.tag && t < done_.size(); ++t) mark(t);
      if (c.tag > low_) low_ = c.tag;
    } else if (c.tag < done_.size()) {
      mark(c.tag);
    }
  }
  std::uint64_t outstanding() const { return done_.size() - 1 - settled_; }
  std::uint64_t settled() const { return settled_; }
  std::uint64_t nacked() const { return nacked_; }

 private:
  void mark(std::uint64_t t) {
    if (done_[t]) return;
    done_[t] = true;
    ++settled_;
  }
  std::vector<bool> done_{false};  // index = tag; tag 0 unused
  std::uint64_t low_ = 0, settled_ = 0, nacked_ = 0;
};

}  // namespace bench
