#include "ledger.h"

namespace chaos {

void Ledger::record(const std::string& message_id, bool redelivered) {
  std::lock_guard lock(mutex_);
  auto& r = receipts_[message_id];
  if (redelivered) ++r.redelivered;
  else ++r.fresh;
  ++deliveries_;
}

std::unordered_map<std::string, Receipt> Ledger::snapshot() const {
  std::lock_guard lock(mutex_);
  return receipts_;
}

std::uint64_t Ledger::deliveries() const {
  std::lock_guard lock(mutex_);
  return deliveries_;
}

}  // namespace chaos
