#pragma once
// FloorPipeline: the simplest correct relay the bench can write, the yardstick of the
// latency phase (its latency is the floor the relay's is divided by).

#include <atomic>
#include <string>
#include <thread>

#include "bench_env.h"

namespace bench {

// One thread of the bench that does what a relay must and nothing more: it waits for
// the producers' NOTIFY (holding migration 0004's lock while it waits, as the relay
// does, so the producers pay the same), claims up to `batch_size` pending rows in id
// order with FOR UPDATE SKIP LOCKED, publishes each as the relay would (persistent,
// mandatory, message id, x-outbox-id), waits for the broker's ack of every delivery
// tag, sets published_at = clock_timestamp() (what the relay records), and commits.
// No retries, ordering, parking, metrics or reconnects: a failure stops it and
// stop() throws. Its PostgreSQL session carries the relays' application_name, so a
// latency step charges its statements to the relay's sessions.
// Thread safety: start and stop from one thread. Owns a thread: not copyable.
class FloorPipeline {
 public:
  FloorPipeline(const BenchEnv& env, int batch_size);
  ~FloorPipeline();
  FloorPipeline(const FloorPipeline&) = delete;
  FloorPipeline& operator=(const FloorPipeline&) = delete;

  // Ends the thread; throws BenchError with its failure if it failed.
  void stop();

 private:
  void run();

  std::string dsn_, amqp_uri_, schema_;
  int batch_size_;
  std::atomic<bool> stopping_{false};
  std::string error_;  // written by the thread before it ends
  std::thread thread_;
};

}  // namespace bench
