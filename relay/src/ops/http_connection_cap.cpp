#include "ops/http_connection_cap.h"

#include <algorithm>
#include <stdexcept>

namespace relay {

HttpConnectionCap::HttpConnectionCap(std::size_t max_connections) : max_(max_connections) {
  if (max_ == 0) throw std::invalid_argument("HttpConnectionCap: max_connections must be at least 1");
  entries_.reserve(max_);
}

std::optional<HttpConnectionCap::Id> HttpConnectionCap::victim() const {
  if (entries_.size() < max_) return std::nullopt;
  // Tiers of victims in the order of the class comment; the oldest of a tier goes.
  auto tier = [](Phase p) { return p == Phase::idle ? 0 : p == Phase::writing ? 1 : 2; };
  const Entry* victim = &entries_.front();
  for (const auto& e : entries_)
    if (tier(e.phase) < tier(victim->phase) || (tier(e.phase) == tier(victim->phase) && e.since < victim->since))
      victim = &e;
  return victim->id;
}

HttpConnectionCap::Id HttpConnectionCap::add() {
  if (entries_.size() >= max_) throw std::logic_error("HttpConnectionCap::add: the cap is reached");
  entries_.push_back({next_id_, Phase::fresh, clock_++});
  return next_id_++;
}

void HttpConnectionCap::enter(Id id, Phase phase) {
  for (auto& e : entries_)
    if (e.id == id) {
      e.phase = phase;
      e.since = clock_++;
    }
}

void HttpConnectionCap::remove(Id id) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; }),
                 entries_.end());
}

}  // namespace relay
