#include "set_aside_queue.h"

#include <algorithm>

namespace outbox::detail {

bool SetAsideQueue::add(InboundMessage& message, Clock::time_point due) {
  if (held_.size() >= capacity_) return false;
  held_.push_back({due, std::move(message)});
  return true;
}

std::optional<InboundMessage> SetAsideQueue::take_due(Clock::time_point now) {
  auto earliest = std::min_element(held_.begin(), held_.end(),
                                   [](const Held& a, const Held& b) { return a.due < b.due; });
  if (earliest == held_.end() || earliest->due > now) return std::nullopt;
  InboundMessage message = std::move(earliest->message);
  held_.erase(earliest);
  return message;
}

std::chrono::milliseconds SetAsideQueue::wait_before_next(Clock::time_point now,
                                                          std::chrono::milliseconds at_most) const {
  auto wait = at_most;
  for (const auto& h : held_) {
    if (h.due <= now) return std::chrono::milliseconds(0);
    // Rounded up: a wait that ends just before the message is due would spin once.
    auto until = std::chrono::ceil<std::chrono::milliseconds>(h.due - now);
    wait = std::min(wait, until);
  }
  return wait;
}

std::vector<InboundMessage> SetAsideQueue::take_all() {
  std::vector<InboundMessage> all;
  all.reserve(held_.size());
  for (auto& h : held_) all.push_back(std::move(h.message));
  held_.clear();
  return all;
}

}  // namespace outbox::detail
