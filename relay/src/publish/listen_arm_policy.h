#pragma once
// ListenArmPolicy: when an armed relay gives up the "a relay is waiting" lock.

#include <cstddef>

namespace relay {

// While a relay holds the lock of migration 0004, every producer commit notifies
// (and notifying commits queue on one lock in the server); taking the lock and
// giving it back costs the relay two round trips on its listener session, and
// taking it again a probe claim. A relay at a low rate goes idle after nearly
// every batch: a claim finds a row or a few, the claim after the batch finds none,
// and it waits again. Giving the lock back at each such claim and taking it again
// a millisecond later was three of its seven round trips per message, and saved
// producers nothing: they notified again as soon as the lock was back.
//
// So an armed relay keeps the lock while the claims since it was last idle add
// up to fewer than kBusyRows rows, and gives it back once they reach it (a
// backlog, or a rate high enough that batches follow each other): then producers
// stop notifying, as before. A relay that keeps the lock wakes at once for the
// notifications of rows committed during its batch; the claim after the batch
// usually took them already, so such a wake costs a claim that finds nothing.
//
// Thread safety: none; the relay loop's thread owns it.
class ListenArmPolicy {
 public:
  // Rows claimed since the relay was last idle after which an armed
  // relay gives the lock back: producers then notify at most this many times
  // while the relay is busy.
  static constexpr std::size_t kBusyRows = 16;

  // After every claim (including a probe that found nothing: `rows` 0). True when
  // an armed relay should give the lock back now.
  bool release_after_claim(std::size_t rows);
  // The relay waits for work (it need not have claimed nothing first: see
  // RelayLoop::finish_batch). Starts the count again, as an empty claim does.
  void went_idle() { rows_since_idle_ = 0; }

 private:
  std::size_t rows_since_idle_ = 0;
};

}  // namespace relay
