#include "policy/backoff.h"

#include <algorithm>
#include <cmath>

namespace relay {

Backoff::Backoff(const RelaySettings& s)
    : initial_ms_(s.backoff_initial_ms),
      max_ms_(s.backoff_max_ms),
      factor_(s.backoff_factor),
      rng_(std::random_device{}()) {}

double Backoff::base_ms(int attempt) const {
  double exp = std::pow(factor_, std::max(0, attempt - 1));
  return std::min(max_ms_, initial_ms_ * exp);
}

std::chrono::milliseconds Backoff::delay(int attempt) {
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  double ms = std::min(max_ms_, base_ms(attempt) * jitter(rng_));
  return std::chrono::milliseconds(static_cast<long long>(std::max(1.0, ms)));
}

}  // namespace relay
