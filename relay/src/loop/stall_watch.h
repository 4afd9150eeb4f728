#pragma once
// StallWatch: whether publishing is stalled (rows due, none published for
// relay.stall_after_s), and the latest failure that says why.

#include <chrono>
#include <optional>
#include <string>

namespace relay {

// Progress is a row published (acked by the broker: its batch may take longer than
// stall_after to commit when its rows are big), or a relay with nothing due (idle, its last claim
// empty, no retry of its own still to come). Past `stall_after` without progress the
// relay is stalled: check() reports the change once, and once when it ends, so the
// log and the gauge say it once per stall; reason() is what /readyz shows meanwhile.
// The report names the latest failure the loop recorded (failure()), with its age.
//
// Pure: the caller passes the time. Thread safety: none; the loop's thread owns it.
class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  struct Change {
    bool stalled = false;
    std::string why;                 // stalled: the report (for the log, the gauge's reason, /readyz)
    std::chrono::seconds lasted{0};  // ended: from the last progress before the stall
  };

  StallWatch(std::chrono::seconds stall_after, Clock::time_point now);

  void progress(Clock::time_point now) { progress_at_ = now; }
  // The latest failure, one line, for the report, and when it happened. Not empty.
  void failure(std::string text, Clock::time_point at) {
    last_failure_ = std::move(text);
    failure_at_ = at;
  }
  const std::string& last_failure() const { return last_failure_; }
  // Why publishing is stalled, as of `now`: the latest failure only when it came
  // after the last progress (an older one is named as older, with its age, not as
  // the cause). For the log at the change, and for /readyz while the stall lasts.
  std::string reason(Clock::time_point now) const;
  // A retry this relay scheduled for `due`: until then an empty claim does not mean
  // that nothing is due.
  void retry_scheduled(Clock::time_point due);
  // `idle`: nothing in flight and the last claim found nothing. A change of state, or
  // nothing.
  std::optional<Change> check(bool idle, Clock::time_point now);
  bool stalled() const { return stalled_; }

 private:
  std::chrono::seconds stall_after_;
  Clock::time_point progress_at_;
  std::optional<Clock::time_point> retry_due_until_;  // the latest retry scheduled
  bool stalled_ = false;
  Clock::time_point stall_began_{};  // progress_at_ when the stall was reported
  std::string last_failure_;
  Clock::time_point failure_at_{};
};

}  // namespace relay
