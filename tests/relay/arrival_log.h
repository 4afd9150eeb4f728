#pragma once
// ArrivalLog: consumes a TestBroker's queue on a thread of its own and records when
// each message id arrived, for duplicate counts, stalls and rates.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "test_env.h"

namespace hostile {

// Thread safety: start/stop from one thread; counters and snapshots may be read by
// another while the consumer runs. REQUIRES: the broker outlives the log, and no
// one else consumes from it meanwhile.
class ArrivalLog {
 public:
  using Clock = std::chrono::steady_clock;
  // `expected`: the ids whose first arrivals expected_arrived() counts.
  ArrivalLog(testenv::TestBroker& broker, std::unordered_set<std::string> expected);
  ~ArrivalLog();
  ArrivalLog(const ArrivalLog&) = delete;
  ArrivalLog& operator=(const ArrivalLog&) = delete;

  void stop();
  std::size_t expected_arrived() const { return expected_arrived_.load(); }
  // Every arrival time of every message id (call after stop()).
  const std::unordered_map<std::string, std::vector<Clock::time_point>>& arrivals() const { return arrivals_; }
  // Set when the consumer failed (the arrivals are then incomplete).
  const std::string& error() const { return error_; }

 private:
  void consume();
  testenv::TestBroker& broker_;
  const std::unordered_set<std::string> expected_;
  std::unordered_map<std::string, std::vector<Clock::time_point>> arrivals_;
  std::atomic<std::size_t> expected_arrived_{0};
  std::atomic<bool> stop_{false};
  std::string error_;
  std::thread thread_;
};

}  // namespace hostile
