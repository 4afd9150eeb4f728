#pragma once
// LoopClock: the relay loop's time, injected so that its timeouts can be tested.

#include <poll.h>

#include <chrono>
#include <cstddef>

namespace relay {

// Every deadline of the loop (a tag's confirm timeout, a batch's time limit, a
// hold, a wake) is read from one LoopClock, and an idle loop's waits (a sleep, a
// poll() on the broker's and the listener's sockets) go through it. The relay runs
// on steady_clock and the kernel (LoopClock::steady()); the collaborators' unit
// tests pass a clock they move by hand, whose waits move it instead of waiting, so
// a 30-second timeout takes no time and no test depends on the machine's speed.
//
// Thread safety: now() may be called from any thread for steady(); a test's clock is
// the test's thread's.
class LoopClock {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~LoopClock() = default;
  virtual Clock::time_point now() const = 0;
  // Sleeps `d`.
  virtual void sleep_for(Clock::duration d) const = 0;
  // Waits up to `timeout` for one of `fds` to be readable (poll(2)); with no fd, sleeps.
  virtual void wait_readable(pollfd* fds, std::size_t n, std::chrono::milliseconds timeout) const = 0;
  // The process's steady_clock: the clock of the relay itself.
  static const LoopClock& steady();
};

}  // namespace relay
