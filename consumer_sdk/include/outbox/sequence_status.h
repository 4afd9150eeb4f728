#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// SequenceStatus: what a ConsumerRunner's sequence guard is waiting for.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace outbox {

// A key whose later events wait for a missing one.
struct GappedKey {
  std::string key;
  std::int64_t last_applied = 0;  // the consumer applied 1..last_applied
  std::int64_t next_held = 0;     // the lowest sequence held (last_applied + 1 is missing)
  double waiting_s = 0;           // since the first held event arrived
};

// A snapshot, refreshed every few seconds by the runner (RunnerOptions::sequence_guard).
struct SequenceStatus {
  bool enabled = false;          // the runner has a sequence guard
  std::int64_t held = 0;         // events held in inbox_held, every key
  std::int64_t keys_gapped = 0;  // keys waiting for a missing event longer than sequence_gap_alert
  // Held events whose handler failed max_attempts times: their keys wait for an
  // operator (docs/CONSUMER.md, "Sequence guard").
  std::int64_t stuck = 0;
  double oldest_gap_s = 0;        // of the keys in `oldest`
  std::vector<GappedKey> oldest;  // up to 20 keys gapped longest, oldest first
  // When it was read from the database; none before the first read.
  std::optional<std::chrono::system_clock::time_point> as_of;
  // For a /readyz: no key waits past the alert bound and nothing is stuck.
  bool healthy() const { return keys_gapped == 0 && stuck == 0; }
};

}  // namespace outbox
