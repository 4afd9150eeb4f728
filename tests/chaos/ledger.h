#pragma once
// Ledger: every message id the chaos consumers received, and how often.

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace chaos {

// How one message id was received. A copy the relay published is delivered first
// with redelivered=false; the broker's own redeliveries (a consumer connection
// lost before its ack) carry redelivered=true and are not copies of the relay's.
struct Receipt {
  int fresh = 0;        // deliveries with redelivered=false: copies the relay published
  int redelivered = 0;  // broker redeliveries
};

// Thread safety: every method may be called from any thread.
class Ledger {
 public:
  void record(const std::string& message_id, bool redelivered);
  std::unordered_map<std::string, Receipt> snapshot() const;
  // Deliveries recorded so far (fresh and redelivered).
  std::uint64_t deliveries() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Receipt> receipts_;
  std::uint64_t deliveries_ = 0;
};

}  // namespace chaos
