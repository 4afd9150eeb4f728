#pragma once
// PublishHold: the pause after a fault nobody is to blame for.

#include <chrono>

#include "policy/backoff.h"

namespace relay {

// After a channel close no message is to blame for, or a batch whose mark rolled
// back, the relay claims and publishes nothing for a while: longer at each such
// fault in a row (200 ms doubling to 10 s, with jitter), so a fault that repeats
// never makes it spin. An ack ends the streak of closes, a commit the streak of
// rollbacks. A hold, not a sleep: batches in flight still read their confirms.
//
// Pure but for the jitter: the caller passes the time. Thread safety: none.
class PublishHold {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kNackHoldMax{1000};

  PublishHold();

  // Holds for the next step of the closes in a row; returns the delay.
  std::chrono::milliseconds after_close(Clock::time_point now) { return hold(++closes_, now); }
  // Holds for the next step of the rollbacks in a row; returns the delay.
  std::chrono::milliseconds after_rollback(Clock::time_point now) { return hold(++rollbacks_, now); }
  // Holds for the next step of the nack runs in a row (NackRun), at most
  // kNackHoldMax: the broker is probed about once a second while it refuses
  // everything, and publishing resumes within about a second of it taking rows again.
  std::chrono::milliseconds after_nacks(Clock::time_point now);
  void acked() {
    closes_ = 0;
    nack_runs_ = 0;
  }
  void committed() { rollbacks_ = 0; }

  bool held(Clock::time_point now) const { return now < until_; }
  Clock::time_point until() const { return until_; }

 private:
  std::chrono::milliseconds hold(int step, Clock::time_point now);

  Backoff backoff_;
  Clock::time_point until_{};
  int closes_ = 0;     // channel closes nobody is to blame for, since the last ack
  int rollbacks_ = 0;  // batches whose mark failed, since the last commit
  int nack_runs_ = 0;  // NackRun restarts since the last ack
};

// The backoff of the relay's environment faults (holds, reconnects): 200 ms, x2, at
// most 10 s, with jitter.
RelaySettings environment_backoff();

}  // namespace relay
