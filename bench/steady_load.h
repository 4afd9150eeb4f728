#pragma once
// Steady load shared by the latency and soak phases: producers committing on a fixed
// schedule (open loop) and a consumer thread on the run's queue, each reporting what
// it did through a callback, so a phase keeps only what it needs (the latency phase
// every message, the soak only those in flight).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <pqxx/connection>
#include <string>
#include <thread>
#include <vector>

#include "amqp_bench_client.h"
#include "bench_env.h"

namespace bench {

std::int64_t unix_us(std::chrono::system_clock::time_point t);

// How a steady rate is split: messages per transaction and producer connections.
struct SteadyPlan {
  int per_tx = 1;      // messages each transaction commits
  double tx_rate = 0;  // transactions/s over all producers
  int producers = 1;   // connections
};
// Up to 1 000/s one message per transaction; above, ceil(rate / 1 000) (or `per_tx`
// when > 0). A commit with its WAL flush takes about a millisecond here, more under
// load: one connection per 250 transactions/s keeps the schedule.
SteadyPlan plan_steady(long rate, int per_tx);

// What a producer does at each commit: the ids it committed and when (unix us).
using OnCommit = std::function<void(const std::vector<std::string>& message_ids, std::int64_t commit_us)>;

struct ProducerRun {
  double tx_per_second = 0;  // this producer's share
  int per_tx = 1;
  std::chrono::system_clock::duration length{};
  double phase = 0;  // in [0,1): producers spread over the interval, not in lockstep
  long keys = 0;     // > 0: ordering keys "k<n mod keys>" (n counts this producer's messages from key_offset)
  long key_offset = 0;
};
// One producer connection committing on a fixed schedule (a late commit does not
// delay the ones after it) until `run.length` has passed or `stop` is set.
void produce_steady(BenchEnv& env, pqxx::connection& conn, const ProducerRun& run, const std::string& payload,
                    const OnCommit& on_commit, const std::atomic<bool>* stop = nullptr);

// Receives from the run's queue on a thread of its own until stopped, handing each
// delivery to `on_delivery` (on that thread).
class DeliveryStream {
 public:
  DeliveryStream(BenchEnv& env, std::function<void(Delivery&&)> on_delivery);
  ~DeliveryStream() { stop(); }
  DeliveryStream(const DeliveryStream&) = delete;
  DeliveryStream& operator=(const DeliveryStream&) = delete;
  void stop();
  // Throws BenchError when the consumer failed (after stop()).
  void check() const;
  bool failed() const { return failed_; }
  // Why it failed (valid once failed() is true).
  const std::string& error() const { return error_; }

 private:
  void loop();
  AmqpBenchClient client_;
  std::function<void(Delivery&&)> on_delivery_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::string error_;
};

}  // namespace bench
