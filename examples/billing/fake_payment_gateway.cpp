#include "fake_payment_gateway.h"

#include <thread>

namespace billing {

FakePaymentGateway::FakePaymentGateway(std::chrono::milliseconds latency) : latency_(latency) {}

FakePaymentGateway::Charge FakePaymentGateway::charge(const std::optional<std::string>& key,
                                                      std::int64_t amount_cents) {
  {
    std::unique_lock lock(mutex_);
    if (meet_callers_ > 1) {
      ++arrived_;
      met_.notify_all();
      met_.wait_for(lock, meet_timeout_, [&] { return arrived_ >= meet_callers_; });
    }
  }
  std::this_thread::sleep_for(latency_);  // the network round trip; no lock held
  std::lock_guard lock(mutex_);
  if (key) {
    if (auto it = by_key_.find(*key); it != by_key_.end()) {
      Charge replay = it->second;
      replay.replayed = true;
      return replay;
    }
  }
  Charge c{"ch_" + std::to_string(taken_.size() + 1), amount_cents, false};
  taken_.push_back(c);
  if (key) by_key_.emplace(*key, c);
  return c;
}

void FakePaymentGateway::meet_before_charging(int callers, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mutex_);
  meet_callers_ = callers;
  meet_timeout_ = timeout;
  arrived_ = 0;
}

std::size_t FakePaymentGateway::charges_taken() const {
  std::lock_guard lock(mutex_);
  return taken_.size();
}

std::int64_t FakePaymentGateway::total_taken_cents() const {
  std::lock_guard lock(mutex_);
  std::int64_t sum = 0;
  for (const auto& c : taken_) sum += c.amount_cents;
  return sum;
}

}  // namespace billing
