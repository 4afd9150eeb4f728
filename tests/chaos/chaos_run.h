#pragma once
// ChaosRun: one chaos run from private servers to the printed table.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "chaos_options.h"
#include "ledger.h"

namespace testenv {
class TcpProxy;
}

namespace chaos {

class PrivateServers;
class ProducerPool;
class LedgerConsumer;
class RelayFleet;
class SequencedConsumer;

// Faults injected, by kind.
struct FaultCounts {
  std::atomic<int> relay_kills{0};
  std::atomic<int> cut_events{0};       // proxy cuts (PostgreSQL, AMQP or both at once)
  std::atomic<int> cut_connections{0};  // connections reset by those cuts
  std::atomic<int> rabbitmq_restarts{0};
  std::atomic<int> postgres_restarts{0};
  std::atomic<int> broker_pauses{0};  // SIGSTOP longer than the confirm timeout
  std::atomic<int> memory_alarms{0};
  std::atomic<int> consumer_stalls{0};  // the limited queue's consumer paused: nacks follow
  std::atomic<int> late_exchange{0};    // the exchange created mid-run
  std::atomic<int> unexpected_relay_exits{0};
};

// Phases: set-up (servers, schema, topology, proxies, relays, consumers), a
// fault-free baseline (must give no duplicate), the chaos phase, the drain (faults
// healed, parked rows of recoverable classes requeued with `outbox-relay dead
// requeue`), the check and the table.
//
// Thread safety: none; run() owns the calling thread and starts its own.
class ChaosRun {
 public:
  explicit ChaosRun(ChaosOptions options);
  ~ChaosRun();
  ChaosRun(const ChaosRun&) = delete;
  ChaosRun& operator=(const ChaosRun&) = delete;

  // Returns the process exit code: 0 when every check passed.
  int run();

 private:
  void set_up();
  std::uint64_t baseline();
  void chaos_phase();
  void server_faults(std::chrono::steady_clock::time_point start);
  void heal();
  bool drain();
  void wait_consumers_idle();
  std::int64_t scalar(const std::string& sql);
  std::string relay_command(const std::vector<std::string>& args);
  std::string write_config(const std::string& name, const std::string& dsn, const std::string& uri);
  double uniform(double lo, double hi);
  void log(const std::string& line);

  ChaosOptions options_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point t0_;
  std::string log_dir_, admin_config_, relay_config_;
  std::unique_ptr<PrivateServers> servers_;
  std::unique_ptr<testenv::TcpProxy> pg_proxy_, amqp_proxy_;
  std::unique_ptr<ProducerPool> producers_;
  Ledger ledger_;
  std::unique_ptr<LedgerConsumer> consumer_, limited_consumer_;
  std::unique_ptr<SequencedConsumer> sequenced_;
  std::unique_ptr<RelayFleet> relays_;
  FaultCounts faults_;
  std::atomic<bool> chaos_over_{false};
  std::uint64_t requeued_ = 0;
};

}  // namespace chaos
