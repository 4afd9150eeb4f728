#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// ConsumerCounters: what a ConsumerRunner did, for logs and metrics.

#include <atomic>
#include <cstdint>

namespace outbox {

// Monotonic counters of one runner (one consumer name). Written by the runner's
// worker threads, read by anyone: every member is atomic, so reading while the
// runner works is safe (a snapshot is not one consistent instant).
// The names in brackets are the Prometheus series the runner exports them as
// (ConsumerRunner::metrics()), each labelled {consumer="<consumer name>"}.
struct ConsumerCounters {
  // Handler transaction committed and the message acked [outbox_consumer_processed_total].
  std::atomic<std::uint64_t> processed{0};
  // Deliveries the inbox recognised as already processed, acked without an effect
  // [inbox_duplicates_total].
  std::atomic<std::uint64_t> duplicates{0};
  // Handler or commit failures, one per failed try [outbox_consumer_failed_total].
  std::atomic<std::uint64_t> failed{0};
  // Failed tries handed back to the queue for another try [outbox_consumer_retried_total].
  std::atomic<std::uint64_t> retried{0};
  // Messages rejected to the dead-letter exchange: a PermanentError, a message without
  // a valid message id, or max_attempts reached [outbox_consumer_dead_lettered_total].
  std::atomic<std::uint64_t> dead_lettered{0};
  // Messages that arrived older than the inbox retention: their inbox row may already
  // be gone, so a duplicate could go unnoticed [inbox_late_deliveries_total].
  std::atomic<std::uint64_t> late_deliveries{0};
  // Sequence guard: events that arrived before their turn and were held in the
  // consumer's database until the missing ones are applied
  // [outbox_consumer_sequence_held_total].
  std::atomic<std::uint64_t> held{0};

  struct Snapshot {
    std::uint64_t processed, duplicates, failed, retried, dead_lettered, late_deliveries, held;
  };
  Snapshot snapshot() const {
    return {processed.load(),     duplicates.load(),      failed.load(), retried.load(),
            dead_lettered.load(), late_deliveries.load(), held.load()};
  }
};

}  // namespace outbox
