#pragma once
// OutboxStore: the relay's PostgreSQL session: claim, mark, report.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "pg/batch_store.h"
#include "pg/batch_transaction.h"
#include "pg/outbox_rows.h"
#include "pg/outbox_statements.h"
#include "pg/pg_result.h"
#include "pg/pg_session.h"

namespace relay {

// Owns one PostgreSQL session (a PgSession: libpq's own, binary results and
// pipelines). It has statement and idle-in-transaction timeouts and TCP keepalives,
// so the server frees the row locks of a relay that hangs or vanishes. Statements
// (OutboxStatements) are prepared on the session's first use of each.
//
// Two faces: the BatchStore the loop uses, whose batch transaction the store owns,
// and the statements on a caller's BatchTransaction (tests and the bench drive the
// transaction themselves). Errors: PgError.
//
// Thread safety: none; one thread owns the store. Not copyable.
class OutboxStore : public BatchStore {
 public:
  explicit OutboxStore(PostgresConfig config, StoreOptions options = {});
  ~OutboxStore() override;
  OutboxStore(const OutboxStore&) = delete;
  OutboxStore& operator=(const OutboxStore&) = delete;

  // (Re)connects and sets the session's limits. Throws PgError kSessionLost.
  void connect() override;
  bool connected() const override;
  void disconnect() override;
  // "host:port/dbname" of the session, for logs (never the password).
  std::string endpoint() const override;

  // BatchStore: the batch's transaction is the store's own (see BatchStore).
  std::vector<ClaimedRow> claim(int limit) override;
  std::vector<ClaimedRow> claim_around(int limit, std::int64_t skip_from, std::int64_t skip_to) override;
  std::vector<ClaimedRow> claim_above(int limit, std::int64_t skip_to) override;
  std::vector<ClaimedRow> claim_key_heads(int limit, const std::vector<int>& lanes, KeyCursor& cursor) override;
  bool in_batch() const override;
  std::size_t load_payloads(std::vector<ClaimedRow>& rows, std::size_t first, std::size_t max_bytes) override;
  // With no failed row the mark and COMMIT travel together (mark_published_and_commit).
  void commit_batch(const std::vector<const ClaimedRow*>& acked, const std::vector<FailedRow>& failed,
                    int max_attempts) override;
  void abort_batch() override;
  void join_lanes(LaneManager& lanes) override;
  LaneManager::Change rebalance_lanes(LaneManager& lanes) override;
  // REQUIRES: connected().
  PgSession& session();

  // Locks and returns up to `limit` due pending rows, skipping rows other relays
  // hold (FOR UPDATE SKIP LOCKED): scheduled rows whose deliver_at has come first
  // (by deliver_at), then the others in id order. The locks last until `tx` ends:
  // they are the lease.
  std::vector<ClaimedRow> claim(BatchTransaction& tx, int limit);
  // The same, leaving out ids in [skip_from, skip_to]: the range of a batch this
  // relay has in flight. SKIP LOCKED would pass over its rows too, but only after
  // visiting each one in the heap (a third of a deep claim's work, and of
  // PostgreSQL's CPU in a drain: docs/perf/NOTEBOOK.md, "Round five"). Rows below the
  // range are claimed first, as always; a row inside it that is not in that batch
  // (a late commit) waits until the batch ends. REQUIRES: skip_from <= skip_to.
  std::vector<ClaimedRow> claim_around(BatchTransaction& tx, int limit, std::int64_t skip_from, std::int64_t skip_to);
  // Only the part above the range: deep in a backlog, where below it are mostly the
  // dead rows of the last batch (ClaimFloorPolicy says when).
  std::vector<ClaimedRow> claim_above(BatchTransaction& tx, int limit, std::int64_t skip_to);
  // relay.ordering per_key: claims only the head (lowest pending id) of each key
  // whose lane is in `lanes`, and only when that head is due. A head that is
  // locked by a batch in flight, or (with park_key) parked, holds its key back.
  // Keys are visited in key order from `cursor`, one index probe per key (a loose
  // index scan), so a claim costs about `limit` probes whether keys have one
  // pending event or thousands; the cursor wraps at the last key, so every key
  // is reached. Rows come in key order. Returns nothing only after a whole pass.
  // REQUIRES: StoreOptions::key_lanes > 0.
  std::vector<ClaimedRow> claim_key_heads(BatchTransaction& tx, int limit, const std::vector<int>& lanes,
                                          KeyCursor& cursor);
  // Loads the payloads of rows[first...] that the claim left out, as many as fit in
  // `max_bytes` (at least one), in one statement; returns the index after the last
  // row loaded. REQUIRES: `tx` is the transaction that claimed `rows`.
  std::size_t load_payloads(BatchTransaction& tx, std::vector<ClaimedRow>& rows, std::size_t first,
                            std::size_t max_bytes);
  // One autocommit statement: is any pending row due? What an idle relay asks
  // instead of a claim transaction (BEGIN, claim, COMMIT).
  bool has_due_rows() override;
  // Seconds until the earliest scheduled row not yet due is due; none when there is
  // none. One autocommit statement, through the scheduled index's first entry.
  std::optional<double> next_scheduled_in() override;
  // One set-based statement for all `rows`, found by their claimed version's address
  // (ctid): published_at is the time of the mark (or, with delete_on_publish, the
  // rows are deleted in `tx`). If any row is not where it was claimed (`tx` changed
  // it since), a second statement marks the rest by id: the address is a shortcut,
  // never the only way a row gets marked. On an outbox with inheritance children or
  // partitions, whose ctids are not unique, the mark goes by id only.
  // REQUIRES: `tx` is the transaction that claimed `rows`.
  void mark_published(BatchTransaction& tx, const std::vector<const ClaimedRow*>& rows);
  // mark_published() and then tx.commit(), in one round trip where the rows are
  // marked by address (BatchTransaction::commit_after). A row `tx` changed since its
  // claim (never in the relay's own flow) is then marked by id after the commit, in
  // a statement of its own: no longer locked by then, it may be claimed and published
  // again by another relay meanwhile (at-least-once). Throws as commit_after():
  // PgError kStatement leaves `tx` to be rolled back, kInDoubt means the
  // marks may or may not have committed. REQUIRES: `tx` claimed `rows` and has
  // nothing else left to do.
  void mark_published_and_commit(BatchTransaction& tx, const std::vector<const ClaimedRow*>& rows);
  // attempts+1, next_attempt_at, last_error; parks rows reaching `max_attempts`.
  void mark_failed(BatchTransaction& tx, const std::vector<FailedRow>& rows, int max_attempts);
  // One autocommit statement on the session (no transaction open on it).
  PendingStats stats() override;

 private:
  PostgresConfig config_;
  const StoreOptions options_;
  std::string schema_;        // quoted
  std::string payloads_sql_;  // load_payloads(): binary results
  // The mark may find rows by ctid: the outbox is one plain table. A ctid names a
  // row version within one table only, so with inheritance children or partitions
  // (not supported, but the table is a public contract) the mark goes by id.
  bool mark_by_address_ = false;
  std::string mark_by_id_sql_;  // the mark by id, as text (mark_published_and_commit's fallback)
  struct ClaimColumns;
  // The store's statements, each prepared on its session's first use of it.
  struct Statement {
    std::string name, sql;
    bool prepared = false;
  };
  std::vector<Statement> statements_;
  const std::string& prepared_statement(const char* name);
  PgResult run_claim(BatchTransaction& tx, const char* name, const PgSession::Params& params);
  std::vector<ClaimedRow> decode_claim(const PgResult& q);
  static void decode_message_columns(const PgResult& q, int i, const ClaimColumns& c, ClaimedRow& row);
  BatchTransaction& batch();  // the BatchStore face's transaction, begun at its claim
  void configure_session(PgSession& setup);
  std::unique_ptr<PgSession> session_;
  std::unique_ptr<BatchTransaction> batch_;  // destroyed before session_: it rolls back on it
};

}  // namespace relay
