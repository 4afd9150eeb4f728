#pragma once
// ProducerPool: threads writing outbox events through the SDK at a steady rate.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "amqp_admin.h"

namespace chaos {

// The message classes of a chaos run, told apart by their message type.
namespace kind {
inline const std::string kOrder = "ChaosOrder";            // routed to the main queue
inline const std::string kNack = "ChaosNack";              // to a length-limited queue: nacks
inline const std::string kUnroutable = "ChaosUnroutable";  // no binding: returned, parked
inline const std::string kMissing = "ChaosMissing";        // exchange never exists: parked
inline const std::string kLate = "ChaosLate";              // exchange created mid-run
}  // namespace kind

struct ProducerOptions {
  std::string dsn;
  std::string schema;
  Topology topology;
  int threads = 2;
  double rate = 300;            // messages per second, all threads together
  double rollback_share = 0.1;  // transactions rolled back on purpose
  double nack_share = 0.04;     // of messages
  double unroutable_share = 0.003;
  double missing_share = 0.001;
  double late_share = 0.001;
  // Orders (kind::kOrder) go to this many shared keys (kSharedKeyPrefix + n), so each
  // key gets a long sequence; the other classes keep a key of their own per event.
  int shared_keys = 64;
  unsigned seed = 1;
  // How the pool starts. Its threads run from construction, so these hold before the
  // first transaction (set_paused()/set_orders_only() after it would race with it).
  bool start_paused = true;
  bool orders_only = false;
};

struct ProducerStats {
  std::uint64_t committed_messages = 0;    // commit returned
  std::uint64_t rolled_back_messages = 0;  // rolled back on purpose
  std::uint64_t in_doubt_messages = 0;     // commit failed: the table tells
  std::uint64_t errors = 0;                // failed transactions (server restarts)
};

// Each thread owns a libpqxx connection (direct to PostgreSQL) and runs
// transactions of 1-4 events plus a business row, committing most and rolling
// back `rollback_share` on purpose. Connection failures (a restarting server) are
// retried; a transaction whose commit failed is "in doubt": only the outbox table
// knows whether it committed.
//
// Thread safety: every public method may be called from any thread. Owns threads:
// not copyable; the destructor stops them.
class ProducerPool {
 public:
  explicit ProducerPool(ProducerOptions options);
  ~ProducerPool();
  ProducerPool(const ProducerPool&) = delete;
  ProducerPool& operator=(const ProducerPool&) = delete;

  void set_paused(bool paused) { paused_ = paused; }
  // Only the main class while true (a fault-free baseline).
  void set_orders_only(bool only) { orders_only_ = only; }
  void stop();
  ProducerStats stats() const;
  // Message ids of transactions rolled back on purpose.
  std::unordered_set<std::string> rolled_back_ids() const;

 private:
  void run(int index);

  ProducerOptions options_;
  std::atomic<bool> stop_{false}, paused_{false}, orders_only_{false};
  mutable std::mutex mutex_;
  ProducerStats stats_;
  std::unordered_set<std::string> rolled_back_;
  std::vector<std::thread> threads_;
};

}  // namespace chaos
