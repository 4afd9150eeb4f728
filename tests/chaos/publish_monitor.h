#pragma once
// PublishMonitor: when rows were published, sampled, to measure how long publishing
// stopped around a fault.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chaos {

// A thread that counts the outbox's published rows every 100 ms on a connection of
// its own (reopened after a failover) and remembers when the count last grew.
// longest_pause(from, to) is the longest stretch within [from, to] during which the
// count did not grow (a stretch that began before `from` counts from `from`).
//
// Thread safety: longest_pause() may be called from any thread. Owns a thread: not
// copyable; the destructor stops and joins it.
class PublishMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  PublishMonitor(std::string dsn, std::string schema);
  ~PublishMonitor();
  PublishMonitor(const PublishMonitor&) = delete;
  PublishMonitor& operator=(const PublishMonitor&) = delete;

  double longest_pause(Clock::time_point from, Clock::time_point to) const;
  // Whether the published count grew at a sample after `t`.
  bool grew_since(Clock::time_point t) const;

 private:
  void run();

  std::string dsn_, schema_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<Clock::time_point> growth_;  // each sample at which the count had grown
  std::thread thread_;
};

}  // namespace chaos
