#pragma once
// Housekeeper: the relay's background thread for the backlog gauges and retention.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "config/config.h"
#include "metrics/relay_metrics.h"

namespace relay {

// On its own PostgreSQL connection (so a long retention run never delays a
// batch), every http.stats_interval_s it refreshes the pending/parked/oldest-age
// gauges (when the HTTP endpoint is on), and every retention.interval_s it deletes
// published rows older than retention.keep (when enabled) under the schema's
// retention lock, so at most one relay of a schema runs retention at a time.
// Connection failures are logged once and retried at the next interval.
//
// Thread safety: start() and stop() from one thread; stop() (also run by the
// destructor) finishes the statement in flight and joins.
class Housekeeper {
 public:
  Housekeeper(const RelayConfig& config, RelayMetrics& metrics);
  ~Housekeeper();
  Housekeeper(const Housekeeper&) = delete;
  Housekeeper& operator=(const Housekeeper&) = delete;

  // Starts the thread if there is anything to do; false if there is not.
  bool start();
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void refresh_stats(class OutboxStore& store);
  void run_retention(class OutboxStore& store);
  // Sleeps until `until` or stop(); false when stopping.
  bool sleep_until(Clock::time_point until);
  bool stopping();

  const RelayConfig& config_;
  RelayMetrics& metrics_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace relay
