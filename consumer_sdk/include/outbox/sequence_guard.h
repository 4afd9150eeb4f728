#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// SequenceGuard: applies each ordering key's events once and in sequence order.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "outbox/consumer_name.h"
#include "outbox/delivery.h"

namespace pqxx {
class transaction_base;
}

namespace outbox {

// A keyed event's place in its key's sequence (the headers x-outbox-key and
// x-outbox-seq the relay sends, migration 0016).
struct KeySequence {
  std::string key;
  std::int64_t seq = 0;  // 1, 2, 3, ... per key
};

// The key and sequence `delivery` carries; nullopt when it carries neither (an
// unkeyed event, or one written before migration 0016). Throws ValidationError
// naming the header when it carries one without the other, or a sequence that is no
// whole number from 1. Pure.
std::optional<KeySequence> key_sequence_of(const Delivery& delivery);

struct SequenceGuardOptions {
  std::string schema = "outbox";  // schema holding inbox_key_sequences (migration 0017)
  ConsumerName consumer;          // required; the same name as the consumer's inbox
};

enum class SequenceOutcome {
  kApply,      // the key's next event: perform the effect in this transaction, then commit
  kDuplicate,  // at or below the last applied: perform nothing
  kGap,        // beyond the next one: an earlier event is missing; never apply it now
};

struct SequenceCheck {
  SequenceOutcome outcome = SequenceOutcome::kApply;
  std::int64_t last_applied = 0;  // after this check (the event's own seq when kApply)
  // Since when a later event waits for a missing one on this key; none without a gap.
  std::optional<std::chrono::system_clock::time_point> waiting_since;
  // kApply: the key's next event is held already (inbox_held): apply it after this commit.
  bool next_held = false;
};

// The consumer's side of the per-key sequences: per consumer and key, the last
// sequence applied, advanced in the transaction that performs the effect
// (inbox_sequence(), migration 0017; the same rule other languages call).
//
// check() locks the key's row until the transaction ends: two workers of one
// consumer never apply one key's events at once, and a rollback takes the advance
// back with the effect. A kGap event must not be applied: keep it until its turn
// (ConsumerRunner with sequence_guard keeps it in inbox_held) or requeue it.
//
// Thread safety: stateless after construction; share it between threads, each with
// its own transaction. REQUIRES: the schema was migrated to 0017; READ COMMITTED.
class SequenceGuard {
 public:
  // Throws ValidationError when the schema or the consumer name is bad.
  explicit SequenceGuard(SequenceGuardOptions options);

  // Throws ValidationError for an empty key or a sequence below 1 (nothing written).
  SequenceCheck check(pqxx::transaction_base& tx, const KeySequence& ks) const;

  const ConsumerName& consumer() const { return options_.consumer; }
  const std::string& schema() const { return options_.schema; }

 private:
  SequenceGuardOptions options_;
  std::string check_sql_;
};

}  // namespace outbox
