#include "publish/listen_arm_policy.h"

namespace relay {

bool ListenArmPolicy::release_after_claim(std::size_t rows) {
  if (rows == 0) {
    rows_since_idle_ = 0;
    return false;
  }
  rows_since_idle_ += rows;
  return rows_since_idle_ >= kBusyRows;
}

}  // namespace relay
