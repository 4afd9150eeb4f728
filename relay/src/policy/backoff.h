#pragma once
// Retry delays for rows that were not published.

#include <chrono>
#include <random>

#include "config/config.h"

namespace relay {

// Exponential backoff with jitter: initial * factor^(attempt-1), capped at the
// maximum, then spread by +/-20% so that rows failed together do not retry in
// lockstep. Not thread-safe (owns its random engine).
class Backoff {
 public:
  explicit Backoff(const RelaySettings& settings);
  // `attempt` counts from 1 (the first failure).
  std::chrono::milliseconds delay(int attempt);
  // The delay before jitter, for tests and docs.
  double base_ms(int attempt) const;

 private:
  double initial_ms_, max_ms_, factor_;
  std::mt19937_64 rng_;
};

}  // namespace relay
