#include "policy/loop_clock.h"

#include <thread>

namespace relay {
namespace {

class SteadyLoopClock final : public LoopClock {
 public:
  Clock::time_point now() const override { return Clock::now(); }
  void sleep_for(Clock::duration d) const override { std::this_thread::sleep_for(d); }
  void wait_readable(pollfd* fds, std::size_t n, std::chrono::milliseconds timeout) const override {
    if (n == 0) {
      std::this_thread::sleep_for(timeout);
      return;
    }
    ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(timeout.count()));
  }
};

}  // namespace

const LoopClock& LoopClock::steady() {
  static const SteadyLoopClock clock;
  return clock;
}

}  // namespace relay
