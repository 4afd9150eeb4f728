#pragma once
// BatchStore: what the relay loop asks of one PostgreSQL session, batch by batch.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pg/lane_manager.h"
#include "pg/outbox_rows.h"

namespace relay {

// One session, and on it at most one batch at a time: the batch's transaction
// opens with its claim (its row locks are the lease) and ends with
// commit_batch()/commit_marked() or abort_batch(). The loop keeps a store per batch
// in flight. OutboxStore implements it on PostgreSQL; tests give the loop's
// collaborators a fake.
//
// Errors: PgError (pg/pg_error.h), typed by whether a retry is safe: kSessionLost
// (the batch rolled back with the session), kStatement (the batch's transaction is
// aborted: abort_batch() it), kInDoubt (a commit's answer never came: its marks may or
// may not have committed, so its rows may be published again), kUsage (a bug).
//
// Thread safety: none; one thread owns a store. Implementations own a session: not
// copyable.
class BatchStore {
 public:
  virtual ~BatchStore() = default;

  // (Re)connects; a batch open on the old session is gone with it.
  virtual void connect() = 0;
  virtual bool connected() const = 0;
  // Drops the session (an open batch rolls back with it).
  virtual void disconnect() = 0;
  // "host:port/dbname", for logs (never the password).
  virtual std::string endpoint() const = 0;

  // The claims: each opens the store's batch (REQUIRES: none open) and locks up to
  // `limit` due pending rows other relays do not hold (FOR UPDATE SKIP LOCKED). An
  // empty claim leaves no batch open. See OutboxStore for what each one visits.
  virtual std::vector<ClaimedRow> claim(int limit) = 0;
  // Leaving out ids in [skip_from, skip_to], the range of the batches in flight.
  virtual std::vector<ClaimedRow> claim_around(int limit, std::int64_t skip_from, std::int64_t skip_to) = 0;
  // Only rows above skip_to.
  virtual std::vector<ClaimedRow> claim_above(int limit, std::int64_t skip_to) = 0;
  // relay.ordering per_key: the head of each key whose lane is in `lanes`, from `cursor`.
  virtual std::vector<ClaimedRow> claim_key_heads(int limit, const std::vector<int>& lanes, KeyCursor& cursor) = 0;
  // Whether a batch is open (a claim found rows and has not been ended).
  virtual bool in_batch() const = 0;

  // Loads the payloads of rows[first...] the claim left out, as many as fit in
  // `max_bytes` (at least one); returns the index after the last row loaded.
  // REQUIRES: in_batch(), `rows` are its rows.
  virtual std::size_t load_payloads(std::vector<ClaimedRow>& rows, std::size_t first, std::size_t max_bytes) = 0;

  // Marks `acked` published (or deletes them, relay.on_publish delete), marks
  // `failed` (attempts, next_attempt_at, last_error; parks at `max_attempts`), and
  // commits: the batch ends. REQUIRES: in_batch().
  virtual void commit_batch(const std::vector<const ClaimedRow*>& acked, const std::vector<FailedRow>& failed,
                            int max_attempts) = 0;
  // Rolls the batch back (its rows stay pending); no-op when none is open. Never throws.
  virtual void abort_batch() = 0;

  // One autocommit statement each, outside any batch: is a pending row due? when is
  // the earliest scheduled row due? the counts for the summary.
  virtual bool has_due_rows() = 0;
  virtual std::optional<double> next_scheduled_in() = 0;
  virtual PendingStats stats() = 0;

  // relay.ordering per_key: joins the lanes' members and rebalances them on this
  // session (its advisory locks). REQUIRES: no batch open.
  virtual void join_lanes(LaneManager& lanes) = 0;
  virtual LaneManager::Change rebalance_lanes(LaneManager& lanes) = 0;
};

}  // namespace relay
