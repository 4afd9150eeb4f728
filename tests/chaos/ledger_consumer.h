#pragma once
// LedgerConsumer: consumes one queue into the Ledger, through broker restarts.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ledger.h"

namespace chaos {

struct ConsumerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string queue;
  int prefetch = 500;
  // Pause after each message: a slow consumer lets a length-limited queue fill up.
  std::chrono::milliseconds per_message_delay{0};
  // A cluster's nodes: when not empty, each (re)connect tries the next of these
  // instead of `port`, so the consumer follows the cluster through node failures.
  std::vector<std::uint16_t> ports;
};

// A thread with its own AMQP connection (direct to the broker, not through the
// proxy) that records every delivery's message id and then acks it. A lost
// connection is reopened every 500 ms; unacked messages come back from the broker
// flagged redelivered.
//
// Thread safety: set_paused() and reconnects() may be called from any thread.
// Owns a thread: not copyable. The destructor stops and joins it.
class LedgerConsumer {
 public:
  LedgerConsumer(ConsumerOptions options, Ledger& ledger);
  ~LedgerConsumer();
  LedgerConsumer(const LedgerConsumer&) = delete;
  LedgerConsumer& operator=(const LedgerConsumer&) = delete;

  // While paused nothing is consumed (at most `prefetch` messages wait unacked).
  void set_paused(bool paused) { paused_ = paused; }
  void set_delay(std::chrono::milliseconds delay) { delay_ms_ = static_cast<int>(delay.count()); }
  std::uint64_t reconnects() const { return reconnects_; }

 private:
  void run();
  // Consumes until the connection fails or stop; returns normally either way.
  void consume_once();

  ConsumerOptions options_;
  Ledger& ledger_;
  std::atomic<bool> stop_{false}, paused_{false};
  std::atomic<int> delay_ms_{0};
  std::atomic<std::uint64_t> reconnects_{0};
  std::size_t next_port_ = 0;  // the consumer thread's own
  std::thread thread_;
};

}  // namespace chaos
