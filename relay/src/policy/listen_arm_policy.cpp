#include "policy/listen_arm_policy.h"

namespace relay {

bool ListenArmPolicy::release_after_claim(std::size_t rows, Clock::time_point now) {
  if (now - window_start_ >= kWindow) {
    window_start_ = now;
    window_rows_ = 0;
  }
  if (rows == 0) {
    rows_since_idle_ = 0;
    return false;
  }
  rows_since_idle_ += rows;
  window_rows_ += rows;
  return rows_since_idle_ >= kBusyRows || window_rows_ >= kWindowRows;
}

}  // namespace relay
