#pragma once
// FakePaymentGateway: an in-process stand-in for a card processor.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace billing {

// Takes charges the way a real provider does: the call is slow, it happens outside
// the consumer's database transaction (a rollback does not undo it), and it honours
// an idempotency key: a second charge with a key already seen returns the first
// charge instead of taking the money again.
//
// Thread-safe: charges from many workers may overlap (each sleeps the latency
// without holding the lock).
class FakePaymentGateway {
 public:
  explicit FakePaymentGateway(std::chrono::milliseconds latency = std::chrono::milliseconds(200));

  struct Charge {
    std::string id;  // "ch_N"
    std::int64_t amount_cents;
    bool replayed;  // true: the idempotency key was seen, nothing was taken
  };
  // Sleeps the latency, then takes `amount_cents` (or replays the earlier charge for
  // `idempotency_key`). No key: every call takes money.
  Charge charge(const std::optional<std::string>& idempotency_key, std::int64_t amount_cents);

  // For tests that show a race between workers: from now on each charge first waits
  // (at most `timeout`) until `callers` charges are in flight at once, so the race
  // happens whatever the machine's scheduling. Off (1) by default.
  void meet_before_charging(int callers, std::chrono::milliseconds timeout);

  // Charges that actually took money.
  std::size_t charges_taken() const;
  std::int64_t total_taken_cents() const;

 private:
  std::chrono::milliseconds latency_;
  mutable std::mutex mutex_;
  std::vector<Charge> taken_;
  std::map<std::string, Charge> by_key_;
  std::condition_variable met_;
  int meet_callers_ = 1;
  int arrived_ = 0;
  std::chrono::milliseconds meet_timeout_{0};
};

}  // namespace billing
