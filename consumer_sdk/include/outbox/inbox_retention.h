#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// InboxRetention: how long inbox rows are kept, and the batched cleanup.

#include <chrono>
#include <cstdint>
#include <string>

#include "outbox/duration.h"  // format_duration, for messages about these policies
#include "outbox/pqxx_compat.h"

namespace outbox {

struct RetentionPolicy {
  // How long an inbox row is kept after it was processed. A duplicate that arrives
  // later than this is no longer recognised.
  std::chrono::seconds retention{std::chrono::hours(24 * 30)};
  // The longest a message can come back after it was first sent: broker redelivery,
  // relay retries (relay.backoff_max_ms x max_attempts), the dead-letter queue's TTL,
  // operator replays. The retention must be at least this.
  std::chrono::seconds redelivery_horizon{std::chrono::hours(24 * 14)};
  // Rows deleted per cleanup transaction (1-100000): small batches keep locks short.
  int batch_size = 1000;
};

// Throws ValidationError unless 0 < redelivery_horizon <= retention and batch_size is
// in range. The message names the field and both durations. Pure; thread-safe.
void validate_retention_policy(const RetentionPolicy& policy);

// Deletes inbox rows older than the retention, oldest first, in batches of
// `batch_size` rows, one short transaction each, on the indexed processed time.
// One instance at a time: a session advisory lock per schema makes a concurrent
// cleanup (another replica) return at once instead of competing.
//
// Thread safety: stateless after construction; purge() uses the caller's connection.
class InboxRetention {
 public:
  // Throws ValidationError for a bad schema name or policy (see validate_retention_policy).
  InboxRetention(std::string schema, RetentionPolicy policy);

  struct PurgeResult {
    std::int64_t removed = 0;  // rows deleted by this call
    int batches = 0;           // transactions that deleted at least one row
    bool skipped = false;      // another cleanup of this schema held the lock
  };
  // REQUIRES: no transaction open on `conn`.
  PurgeResult purge(outbox::PgConnection& conn) const;

  // True when a message sent at `sent_at` arrives at `now` older than the retention:
  // its inbox row may be gone already, so a duplicate of it could go unnoticed.
  bool is_late(std::chrono::system_clock::time_point sent_at, std::chrono::system_clock::time_point now) const {
    return now - sent_at > policy_.retention;
  }

  const RetentionPolicy& policy() const { return policy_; }

 private:
  std::string schema_name_;
  std::string delete_sql_;
  RetentionPolicy policy_;
};

}  // namespace outbox
