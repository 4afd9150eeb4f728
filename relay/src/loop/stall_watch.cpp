#include "loop/stall_watch.h"

namespace relay {

StallWatch::StallWatch(std::chrono::seconds stall_after, Clock::time_point now)
    : stall_after_(stall_after), progress_at_(now) {}

void StallWatch::retry_scheduled(Clock::time_point due) {
  if (!retry_due_until_ || due > *retry_due_until_) retry_due_until_ = due;
}

std::optional<StallWatch::Change> StallWatch::check(bool idle, Clock::time_point now) {
  // Idle, and no retry this relay scheduled is still to come: nothing is due. A
  // second of slack: the retry's claim comes a poll after it is due.
  if (idle && (!retry_due_until_ || now > *retry_due_until_ + std::chrono::seconds(1))) progress_at_ = now;
  const bool stalled = now - progress_at_ > stall_after_;
  if (stalled == stalled_) return std::nullopt;
  stalled_ = stalled;
  Change change;
  change.stalled = stalled;
  if (!stalled) {  // progress_at_ is now: the stall lasted from its last progress before
    change.lasted = std::chrono::duration_cast<std::chrono::seconds>(now - stall_began_);
    return change;
  }
  stall_began_ = progress_at_;
  change.why = reason(now);
  return change;
}

std::string StallWatch::reason(Clock::time_point now) const {
  std::string why = "publishing stalled: rows are due but none was published for over " +
                    std::to_string(stall_after_.count()) + " s; ";
  if (last_failure_.empty()) return why + "no failure recorded";
  const auto ago = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - failure_at_).count());
  if (failure_at_ >= progress_at_) return why + "last failure (" + ago + " s ago): " + last_failure_;
  return why + "no failure since the last progress (the one before, " + ago + " s ago: " + last_failure_ + ")";
}

}  // namespace relay
