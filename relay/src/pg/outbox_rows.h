#pragma once
// The outbox's rows as the relay loop sees them: claimed, failed, counted.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace relay {

// One claimed outbox row, owned by the batch that claimed it.
struct ClaimedRow {
  std::int64_t id = 0;
  // Where the claimed version of the row lies (its ctid, "(block,offset)"). The
  // claim's lock keeps it there until the claim's transaction ends, so the mark
  // finds the row by address instead of by an index probe (OutboxStore::mark_published).
  std::string ctid;
  std::string message_id, exchange, routing_key, type, ordering_key, content_type;
  // The key's sequence number (migration 0016), sent as x-outbox-seq with the key;
  // none for a row without a key or written before 0016.
  std::optional<std::int64_t> key_seq;
  std::optional<std::string> correlation_id;
  std::vector<std::pair<std::string, std::string>> headers;
  // Payloads up to OutboxStatements::kInlinePayloadBytes come with the claim; larger ones
  // are fetched by load_payloads() just before they are published. The relay drops
  // a payload once it is published, so memory stays bounded whatever the sizes.
  std::string payload;
  std::size_t payload_bytes = 0;
  bool payload_loaded = true;
  int attempts = 0;
  // The row's last failure was a channel close it provoked alone (the column
  // refused_by_broker): publish it alone again, so it cannot take innocent rows down
  // with it a second time.
  bool refused_before = false;
  // Set when a column cannot be turned into a publishable message (malformed
  // headers, a created_at of 'infinity'): names the column and why. Such a row is not
  // sent; it fails on its own as an attempt, and the rest of the claim goes on.
  std::optional<std::string> invalid;
  std::int64_t created_unix_s = 0;  // created_at, floored to seconds; negative before 1970
  // When the row became due, with sub-second precision (latency metrics): created_at,
  // or a later deliver_at (migration 0018).
  double created_unix = 0;
  bool scheduled = false;  // its deliver_at was later than its created_at
};

// A row that was not published, with why, and when to try it again.
struct FailedRow {
  std::int64_t id = 0;
  std::string error;  // one line, no payload, no secret
  std::int64_t retry_in_ms = 0;
  // True when the failure belongs to the message (nack, return, its exchange
  // missing): attempts grows and the row may be parked. False for a lost link or
  // a timeout: last_error is recorded, attempts stays, the row is due at once.
  bool counts_as_attempt = true;
  // The broker refused this row alone (ConfirmTracker::kRefused): its next attempt
  // goes alone (the column refused_by_broker, read back as ClaimedRow::refused_before).
  bool refused_by_broker = false;
};

struct PendingStats {
  std::int64_t pending = 0;  // neither published nor parked
  std::int64_t parked = 0;
  double oldest_pending_age_s = 0;  // 0 when none pending; from deliver_at when later
  // Scheduled rows not yet due (migration 0018): not pending until their deliver_at.
  std::int64_t scheduled = 0;
  std::optional<double> next_scheduled_in_s;  // when the earliest of them is due
};

// Where the per_key claim's walk over the pending keys (in key order) goes on; the
// relay keeps one for all its claim sessions, so consecutive batches take the next
// keys instead of passing again over keys whose heads are in flight.
struct KeyCursor {
  bool at_start = true;  // walk from the first key
  std::string after;     // else: from the first key after this one
};

}  // namespace relay
