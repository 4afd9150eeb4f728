#include "policy/claim_floor_policy.h"

namespace relay {

ClaimFloorPolicy::Start ClaimFloorPolicy::next_claim(bool behind_batches) {
  const bool deep = full_claims_in_a_row_ >= kDeepAfter;
  if (!behind_batches || !deep || ++since_lowest_ >= kFromLowestEvery) {
    since_lowest_ = 0;
    return behind_batches ? Start::kAroundRange : Start::kLowest;
  }
  return Start::kAboveRange;
}

void ClaimFloorPolicy::claimed(std::size_t rows, std::size_t limit) {
  full_claims_in_a_row_ = rows > 0 && rows >= limit ? full_claims_in_a_row_ + 1 : 0;
}

}  // namespace relay
