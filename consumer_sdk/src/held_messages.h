#pragma once
// HeldMessages: the events that arrived before their turn (inbox_held, migration
// 0017), kept in the consumer's database until the sequence before them is applied.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outbox/consumer_name.h"
#include "outbox/delivery.h"
#include "outbox/sequence_guard.h"
#include "outbox/sequence_status.h"

namespace pqxx {
class transaction_base;
}

namespace outbox::detail {

struct HeldMessage {
  KeySequence ks;
  Delivery delivery;  // as it arrived (message_id parsed)
  int attempts = 0;   // failed tries of the handler so far
};

// Statements on inbox_held and inbox_key_sequences for one consumer name; each
// runs in the caller's transaction.
// Thread safety: stateless after construction; share it, one transaction per thread.
class HeldMessages {
 public:
  HeldMessages(const std::string& schema, const ConsumerName& consumer);

  // Keeps `d` (event `ks`) until its turn; false when it is held already (a
  // redelivery). REQUIRES: SequenceGuard::check said kGap in this transaction.
  bool hold(pqxx::transaction_base& tx, const KeySequence& ks, const Delivery& d) const;
  // `key`'s next event, when it is held and due for a try. Locks the key's row
  // (SKIP LOCKED: a worker that has the key already keeps it) in the order every
  // other path takes: the key's row, then its held rows (inbox_sequence() deletes
  // a held copy of what it applies, under the key's lock).
  std::optional<HeldMessage> take_next(pqxx::transaction_base& tx, const std::string& key) const;
  void remove(pqxx::transaction_base& tx, const KeySequence& ks) const;
  // After a failed try: one more attempt, the error, the next try after `delay`, or
  // never (`final`: the key waits for an operator).
  void record_failure(pqxx::transaction_base& tx, const KeySequence& ks, const std::string& error,
                      std::chrono::milliseconds delay, bool final) const;
  // Keys whose next event is held and due for a try, at most `limit`.
  std::vector<std::string> ready_keys(pqxx::transaction_base& tx, int limit) const;
  SequenceStatus status(pqxx::transaction_base& tx, std::chrono::milliseconds alert_after, int list) const;

 private:
  std::string schema_;  // quoted
  std::string consumer_;
};

}  // namespace outbox::detail
