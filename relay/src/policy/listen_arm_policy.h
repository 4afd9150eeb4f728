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
// A relay that was busy a moment ago does not take the lock when a claim finds
// nothing: it polls again within a millisecond instead (poll_instead_of_arming). At
// a steady 2 000 msg/s a claim now and then finds nothing, and a relay that then took
// the lock, or queued for it, made every producer's commit notify while it did:
// notifying commits run one at a time in the server (each with its own WAL flush),
// and the listener's session handles each notification. Polling instead, the soak in
// delete mode at 2 000 msg/s cost the whole server 319-348 us of CPU per message
// against 408-484, and the relay's sessions 107-132 against 183-250 (docs/perf/
// NOTEBOOK.md, "Round ten"). It polls while its claims found kPollRows rows within a
// window (1 500 rows/s) and a row within kBusyLinger; then it takes the lock as
// before. Polling costs a row up to one poll's wait: at 1 000 msg/s that was +0.7 ms
// on the median (0.5 -> 1.2 ms, the p99 +50 %), more than the notifications cost
// there, so below 1 500 rows/s the relay keeps taking the lock.
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
  // Rows claimed within a window (this one or the last) above which a relay that
  // finds nothing polls instead of taking the lock: 1 500 rows/s.
  static constexpr std::size_t kPollRows = 150;
  // How long a relay busy a moment ago sleeps before it claims again, instead of
  // taking the lock: the time one row takes to arrive at the recent rate, within
  // these bounds (busy_poll). A fixed millisecond added 0.5 ms to the median latency
  // at 1 000 msg/s (docs/perf/NOTEBOOK.md, "Round ten").
  static constexpr std::chrono::microseconds kBusyPollMin{200}, kBusyPollMax{1000};
  // How long after its last claim that found rows such a relay still polls: at
  // 1 500 rows/s a gap of 10 ms without a row almost never happens (e^-15); after a
  // burst it costs 10 to 50 claims that find nothing.
  static constexpr std::chrono::milliseconds kBusyLinger{10};

  // After every claim (including a probe that found nothing: `rows` 0). True when
  // an armed relay should give the lock back now.
  bool release_after_claim(std::size_t rows, Clock::time_point now);
  // The relay waits for work (it need not have claimed nothing first: see
  // RelayLoop::finish_batch). Starts the count since idle again, as an empty claim does.
  void went_idle() { rows_since_idle_ = 0; }
  // Whether a relay that does not hold the lock and found nothing should poll again
  // in busy_poll() rather than take the lock: its claims reached kPollRows within
  // this window or the last one, and one found rows within kBusyLinger.
  bool poll_instead_of_arming(Clock::time_point now) const;
  // The sleep before such a relay's next claim: about one row's arrival at the
  // rate of this window or the last, within [kBusyPollMin, kBusyPollMax].
  std::chrono::microseconds busy_poll() const;
  // A claim failed: it waits as an idle relay does, not busy_poll().
  void cool_down() { last_rows_at_ = Clock::time_point{}; }

 private:
  std::size_t rows_since_idle_ = 0;
  Clock::time_point window_start_{};
  std::size_t window_rows_ = 0;
  std::size_t previous_window_rows_ = 0;  // of the window just before this one, else 0
  Clock::time_point last_rows_at_{};      // the last claim that found rows
};

}  // namespace relay
