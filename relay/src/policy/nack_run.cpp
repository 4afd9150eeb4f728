#include "policy/nack_run.h"

namespace relay {

bool NackRun::nacked(std::size_t messages, Clock::time_point now) {
  if (in_row_ == 0) began_ = now;
  in_row_ += messages;
  since_restart_ += messages;
  if (since_restart_ < kRunLength) return false;
  since_restart_ = 0;
  ++restarts_;
  return true;
}

void NackRun::acked() {
  in_row_ = 0;
  since_restart_ = 0;
  restarts_ = 0;
}

std::string NackRun::describe(Clock::time_point now) const {
  const auto lasted = std::chrono::duration_cast<std::chrono::seconds>(now - began_).count();
  return "the broker nacked every publish for " + std::to_string(lasted) + " s (" + std::to_string(in_row_) +
         " in a row, " + std::to_string(restarts_) +
         " fresh connection(s)): a quorum queue without a leader, or a full queue with overflow reject-publish";
}

}  // namespace relay
