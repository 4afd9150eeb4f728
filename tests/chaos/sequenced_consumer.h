#pragma once
// SequencedConsumer: the consumer SDK with its sequence guard, consuming the orders
// through the chaos, and the check that it applied every key's events once, in order.

#include <memory>
#include <string>
#include <vector>

#include "amqp_admin.h"

namespace outbox {
class ConsumerRunner;
}

namespace chaos {

// The keys the producers spread their orders over (kind::kOrder only: every event of
// these keys reaches the sequenced consumer's queue, so any gap is a real one).
inline const std::string kSharedKeyPrefix = "acct-";

// A ConsumerRunner (3 workers, prefetch 10, sequence_guard) on a queue of its own
// bound to the orders, connected straight to the servers (it rides out their
// restarts as a deployed consumer would). Its handler records (key, sequence) in
// <schema>.chaos_applied, in the order applied, in the transaction of the guard.
//
// Thread safety: none beyond the runner's own. Owns the runner: not copyable.
class SequencedConsumer {
 public:
  SequencedConsumer(const std::string& pg_dsn, const std::string& amqp_uri, const std::string& schema,
                    const Topology& topology);
  ~SequencedConsumer();
  SequencedConsumer(const SequencedConsumer&) = delete;
  SequencedConsumer& operator=(const SequencedConsumer&) = delete;

  void start();
  // Waits (up to `timeout_s`) until the check passes; returns its failures then, one
  // line each, or the last ones seen: every shared key's applied sequence equal to the
  // outbox's, nothing held, and each key's events applied 1, 2, 3, ... exactly once.
  std::vector<std::string> wait_and_check(int timeout_s);
  std::uint64_t held() const;  // events that arrived before their turn
  std::uint64_t applied() const;

 private:
  std::vector<std::string> check() const;

  std::string pg_dsn_, schema_;
  std::unique_ptr<outbox::ConsumerRunner> runner_;
};

}  // namespace chaos
