#pragma once
// StopSignal: a stop flag that sleeping threads wake up for.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace outbox::detail {

// Thread-safe.
class StopSignal {
 public:
  void set() {
    {
      std::lock_guard lock(mutex_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool is_set() const {
    std::lock_guard lock(mutex_);
    return set_;
  }
  // Sleeps up to `d`; returns true (early) once set.
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, d, [&] { return set_; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

}  // namespace outbox::detail
