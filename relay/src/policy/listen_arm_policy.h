#pragma once
// ListenArmPolicy: when an armed relay gives up the "a relay is waiting" lock.

#include <chrono>
#include <cstddef>

namespace relay {

// While a relay holds the lock of migration 0004, every producer commit notifies
// (and notifying commits queue on one lock in the server: with 8 producer
// connections committing single rows this machine's enqueue rate halves, see
// docs/PERFORMANCE.md); taking the lock and giving it back costs the relay two
// round trips on its listener session, and taking it again a probe claim. A relay
// at a low rate goes idle after nearly every batch: a claim finds a row or a few,
// and it waits again. Giving the lock back at each such claim and taking it again
// a millisecond later was three of its seven round trips per message, and saved
// producers little: they notified again as soon as the lock was back.
//
// So an armed relay keeps the lock while it is idle between small batches, and
// gives it back, as before, once it is busy: the claims since it was last idle
// add up to kBusyRows rows (a backlog, or batches that follow each other), or the
// rows it claimed within kWindow reach kWindowRows (a rate at which the
// producers' notifications would cost more than the relay's round trips save).
// A relay that keeps the lock wakes at once for the notifications of rows
// committed during its batch.
//
// Thread safety: none; the relay loop's thread owns it.
class ListenArmPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // Rows claimed since the relay was last idle after which it gives the lock back.
  static constexpr std::size_t kBusyRows = 16;
  // Rows claimed within one window after which it gives the lock back: 750 rows/s.
  // Keeping the lock pays at a few hundred rows a second and not at a thousand, where
  // the producers' notifications and smaller batches cost what the relay saves
  // (docs/perf/NOTEBOOK.md, round seven); 750 is well above 500 rows/s arriving at
  // random (50 ± 7 a window).
  static constexpr std::size_t kWindowRows = 75;
  static constexpr std::chrono::milliseconds kWindow{100};

  // After every claim (including a probe that found nothing: `rows` 0). True when
  // an armed relay should give the lock back now.
  bool release_after_claim(std::size_t rows, Clock::time_point now);
  // The relay waits for work (it need not have claimed nothing first: see
  // RelayLoop::finish_batch). Starts the count since idle again, as an empty claim does.
  void went_idle() { rows_since_idle_ = 0; }

 private:
  std::size_t rows_since_idle_ = 0;
  Clock::time_point window_start_{};
  std::size_t window_rows_ = 0;
};

}  // namespace relay
