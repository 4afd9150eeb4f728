#include "loop/isolator.h"

namespace relay {

template <class Key>
void Isolator::remember(std::map<Key, Clock::time_point>& memory, const Key& key, Clock::time_point now) {
  if (memory.size() >= kMaxRemembered) memory.clear();
  memory[key] = now + kMemory;
}

// Whether `key` is remembered and not expired (an expired entry is dropped).
template <class Key>
bool Isolator::remembered(std::map<Key, Clock::time_point>& memory, const Key& key, Clock::time_point now) {
  if (memory.empty()) return false;
  const auto it = memory.find(key);
  if (it == memory.end()) return false;
  if (now <= it->second) return true;
  memory.erase(it);
  return false;
}

bool Isolator::must_go_alone(ClaimedRow& row, Clock::time_point now) {
  if (row.refused_before) return true;
  // Perhaps declared since (an exchange), or found innocent meanwhile (a row): past
  // their time, rows go together again.
  if (!remembered(refusing_exchanges_, row.exchange, now) && !remembered(lone_rows_, row.id, now)) return false;
  row.refused_before = true;
  return true;
}

void Isolator::exchange_refused(const std::string& exchange, Clock::time_point now) {
  remember(refusing_exchanges_, exchange, now);
}

void Isolator::isolation_cut_short(std::int64_t row_id, Clock::time_point now) { remember(lone_rows_, row_id, now); }

bool Isolator::new_refusal(const std::string& reason) {
  if (reason == last_refusal_) return false;
  last_refusal_ = reason;
  return true;
}

}  // namespace relay
