#include "outbox/amqp/endpoint_rotation.h"

#include <algorithm>
#include <numeric>

namespace outbox::amqp {

EndpointRotation::EndpointRotation(std::size_t count, EndpointOrder order, std::uint64_t seed)
    : count_(std::max<std::size_t>(count, 1)), order_(order), rng_(seed) {
  new_round();
}

void EndpointRotation::new_round() {
  round_.resize(count_);
  std::iota(round_.begin(), round_.end(), std::size_t{0});
  if (order_ == EndpointOrder::kShuffled) std::shuffle(round_.begin(), round_.end(), rng_);
  if (has_last_) {  // the node just left goes last: it is likely the one that failed
    auto it = std::find(round_.begin(), round_.end(), last_);
    if (it != round_.end()) std::rotate(it, it + 1, round_.end());
  }
  pos_ = 0;
}

std::size_t EndpointRotation::next() {
  if (pos_ >= round_.size()) new_round();
  return round_[pos_++];
}

void EndpointRotation::connected(std::size_t index) {
  has_last_ = true;
  last_ = index;
  pos_ = round_.size();  // the next attempt (after a loss) starts a new round
}

}  // namespace outbox::amqp
