#include "loop/publish_hold.h"

#include <algorithm>

namespace relay {

RelaySettings environment_backoff() {
  RelaySettings s;
  s.backoff_initial_ms = 200;
  s.backoff_max_ms = 10000;
  s.backoff_factor = 2.0;
  return s;
}

PublishHold::PublishHold() : backoff_(environment_backoff()) {}

std::chrono::milliseconds PublishHold::after_nacks(Clock::time_point now) {
  const auto delay = std::min(backoff_.delay(++nack_runs_), kNackHoldMax);
  until_ = std::max(until_, now + delay);
  return delay;
}

std::chrono::milliseconds PublishHold::hold(int step, Clock::time_point now) {
  const auto delay = backoff_.delay(step);
  until_ = std::max(until_, now + delay);
  return delay;
}

}  // namespace relay
