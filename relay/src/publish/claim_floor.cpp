#include "publish/claim_floor.h"

#include <algorithm>

namespace relay {

ClaimFloor::ClaimFloor(int full_every) : full_every_(std::max(1, full_every)) {}

std::int64_t ClaimFloor::next(std::optional<std::int64_t> highest_in_flight) {
  if (!highest_in_flight || floored_in_a_row_ + 1 >= full_every_ ||
      *highest_in_flight == std::numeric_limits<std::int64_t>::max()) {
    floored_in_a_row_ = 0;
    return kFromStart;
  }
  ++floored_in_a_row_;
  return *highest_in_flight + 1;
}

}  // namespace relay
