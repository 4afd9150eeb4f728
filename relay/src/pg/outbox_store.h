#pragma once
// OutboxStore: the relay's PostgreSQL session: claim, mark, report.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "pg/batch_transaction.h"
#include "pg/pg_result.h"
#include "pg/pg_session.h"

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
  // Payloads up to OutboxStore::kInlinePayloadBytes come with the claim; larger ones
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

// How a store claims and marks, fixed at construction (from relay.*).
struct StoreOptions {
  // relay.ordering per_key: the number of lanes keys hash to; 0 = unordered claims
  // (claim_key_heads() needs it > 0).
  int key_lanes = 0;
  // per_key, relay.key_failure_policy park_key: a parked head holds its key back.
  bool park_key = true;
  // relay.on_publish delete: mark_published() deletes the rows instead of marking them.
  bool delete_on_publish = false;
  // relay.max_payload_bytes: larger payloads are not fetched; their rows are invalid.
  std::size_t max_payload_bytes = 16 * 1024 * 1024;

  // The options relay.* asks for.
  static StoreOptions of(const RelaySettings& relay);
};

// Owns one PostgreSQL session (a PgSession: libpq's own, binary results and
// pipelines). It has statement and idle-in-transaction timeouts and TCP keepalives,
// so the server frees the row locks of a relay that hangs or vanishes. Statements
// are prepared on the session's first use of each.
//
// Thread safety: none; one thread owns the store. Not copyable.
class OutboxStore {
 public:
  explicit OutboxStore(PostgresConfig config, StoreOptions options = {});
  ~OutboxStore();
  OutboxStore(const OutboxStore&) = delete;
  OutboxStore& operator=(const OutboxStore&) = delete;

  // (Re)connects and sets the session's limits. Throws pqxx::broken_connection.
  void connect();
  bool connected() const;
  void disconnect();
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
  // Larger payloads are not sent with the claim (see ClaimedRow::payload).
  static constexpr std::size_t kInlinePayloadBytes = 2 * 1024;
  // One autocommit statement: is any pending row due? What an idle relay asks
  // instead of a claim transaction (BEGIN, claim, COMMIT).
  bool has_due_rows();
  // Seconds until the earliest scheduled row not yet due is due; none when there is
  // none. One autocommit statement, through the scheduled index's first entry.
  std::optional<double> next_scheduled_in();
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
  // pqxx::sql_error leaves `tx` to be rolled back, pqxx::in_doubt_error means the
  // marks may or may not have committed. REQUIRES: `tx` claimed `rows` and has
  // nothing else left to do.
  void mark_published_and_commit(BatchTransaction& tx, const std::vector<const ClaimedRow*>& rows);
  // attempts+1, next_attempt_at, last_error; parks rows reaching `max_attempts`.
  void mark_failed(BatchTransaction& tx, const std::vector<FailedRow>& rows, int max_attempts);
  // One autocommit statement on the session (no transaction open on it).
  PendingStats stats();

  // The one spelling of "pending": neither published nor parked. `alias` is a
  // table alias with its dot ("o.") or empty. Pure.
  static std::string pending_sql(const std::string& alias = "");

  // "host:port/dbname" of the session, for logs (never the password).
  std::string endpoint() const;

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
  static std::string claim_select_list();
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
  void add_key_walk(const std::string& select_list);
  std::unique_ptr<PgSession> session_;
};

}  // namespace relay
