#include "publish/listen_arm_policy.h"

namespace relay {

bool ListenArmPolicy::release_after_claim(std::size_t rows) {
  if (rows == 0) {
    rows_since_empty_ = 0;
    return false;
  }
  rows_since_empty_ += rows;
  return rows_since_empty_ >= kBusyRows;
}

}  // namespace relay
