#include "policy/listen_arm_policy.h"

#include <algorithm>

namespace relay {

bool ListenArmPolicy::release_after_claim(std::size_t rows, Clock::time_point now) {
  if (now - window_start_ >= kWindow) {
    previous_window_rows_ = now - window_start_ < 2 * kWindow ? window_rows_ : 0;
    window_start_ = now;
    window_rows_ = 0;
  }
  if (rows == 0) {
    rows_since_idle_ = 0;
    return false;
  }
  last_rows_at_ = now;
  rows_since_idle_ += rows;
  window_rows_ += rows;
  return rows_since_idle_ >= kBusyRows || window_rows_ >= kWindowRows;
}

bool ListenArmPolicy::poll_instead_of_arming(Clock::time_point now) const {
  if (last_rows_at_ == Clock::time_point{} || now - last_rows_at_ >= kBusyLinger) return false;
  // Both windows end within kWindow + kBusyLinger of now: a claim found rows since.
  return std::max(window_rows_, previous_window_rows_) >= kPollRows;
}

std::chrono::microseconds ListenArmPolicy::busy_poll() const {
  const auto rows = std::max<std::size_t>({window_rows_, previous_window_rows_, 1});
  const std::chrono::microseconds one_row{std::chrono::microseconds(kWindow).count() / static_cast<long long>(rows)};
  return std::clamp(one_row, kBusyPollMin, kBusyPollMax);
}

}  // namespace relay
