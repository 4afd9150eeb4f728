#include "pg/outbox_statements.h"

#include "pg/lane_manager.h"

namespace relay {

StoreOptions StoreOptions::of(const RelaySettings& relay) {
  StoreOptions o;
  if (relay.ordering == Ordering::kPerKey) o.key_lanes = relay.lanes;
  o.park_key = relay.key_failure_policy == KeyFailurePolicy::kParkKey;
  o.delete_on_publish = relay.on_publish == OnPublish::kDelete;
  o.max_payload_bytes = static_cast<std::size_t>(relay.max_payload_bytes);
  return o;
}

std::string OutboxStatements::pending_sql(const std::string& alias) {
  return alias + "published_at IS NULL AND " + alias + "parked_at IS NULL";
}

// The claim's columns, named: the SELECT list and the decoder use the same names.
// Both claims call the outbox `o` (the key walk joins it to its steps).
std::string OutboxStatements::claim_select_list() {
  return "SELECT id, o.ctid AS ctid, message_id::text AS message_id, exchange, routing_key, message_type, "
         "ordering_key, key_seq, "
         "content_type, headers::text AS headers, correlation_id, "
         "CASE WHEN octet_length(payload) <= " +
         std::to_string(OutboxStatements::kInlinePayloadBytes) +
         " THEN payload END "
         "AS inline_payload, attempts, date_part('epoch', created_at) AS created_epoch, "
         "date_part('epoch', deliver_at) AS due_epoch, "
         "octet_length(payload) AS payload_bytes, "
         "refused_by_broker AS refused_before ";
}

namespace {

// The per_key claim is a loose index scan over outbox_pending_key_idx: a recursive
// walk that jumps from each pending key to the next one's lowest pending id (its
// head), up to $3 keys from $4 (or from the first key), then claims the due heads of
// the relay's lanes. Heads are found on committed state: a head another batch holds
// (locked, not yet marked) is skipped by SKIP LOCKED, and the walk never looks past a
// key's head, so its key waits. With park_key a parked head blocks its key; with
// park_message parked rows are not heads. A head another batch marked after this
// statement's snapshot is rechecked on its newest version and not claimed again.
void add_key_walk(const std::string& schema, const StoreOptions& options, const std::string& select_list,
                  std::vector<OutboxStatements::Statement>& out) {
  // Every step is one probe of outbox_pending_key_idx ((ordering_key, id) WHERE
  // published_at IS NULL): the walk's predicate is exactly the index's, so the
  // planner takes it in key order whatever its statistics say. (A "parked_at IS
  // NULL" here let it pick outbox_pending_idx instead and sort every pending row at
  // each step: 100 ms a claim at 6,000 pending rows, against 1 ms.)
  // park_key: a key's head is its lowest unpublished row, parked or not; a parked
  // head is dropped by the final filter and so blocks its key. park_message: a
  // parked row is a step of its own (wparked), after which the walk goes on to the
  // next row of the same key, whose first unparked row is then its head.
  const std::string parked = options.park_key ? "false" : "parked_at IS NOT NULL";
  const std::string next = "SELECT ordering_key, id, " + parked + " FROM " + schema +
                           ".outbox WHERE published_at IS NULL ";
  // walk(wkey, wid, wparked, step): up to `steps` rows, from the first key or after `cursor`.
  auto walk = [&](const std::string& steps, const std::string& cursor) {
    return "WITH RECURSIVE walk(wkey, wid, wparked, step) AS ((SELECT k.*, 1 FROM (" + next +
           (cursor.empty() ? "" : "AND ordering_key > " + cursor + " ") +
           "ORDER BY ordering_key, id LIMIT 1) k) UNION ALL SELECT n.*, w.step + 1 "
           "FROM walk w CROSS JOIN LATERAL (" +
           next +
           "AND (ordering_key, id) > (w.wkey, CASE WHEN w.wparked THEN w.wid ELSE 9223372036854775807 END) "
           "ORDER BY ordering_key, id LIMIT 1) n WHERE w.step < " +
           steps + ") ";
  };
  const std::string lane = LaneManager::lane_sql("o.ordering_key", std::to_string(options.key_lanes));
  for (bool from_cursor : {false, true}) {
    const std::string suffix = from_cursor ? "_from" : "_start";
    // $1 keys to walk, $2 limit, $3 lanes, $4 cursor.
    out.push_back({"outbox_key_heads" + suffix, walk("$1", from_cursor ? "$4" : "") + select_list +
                                                    "FROM walk w JOIN " + schema + ".outbox o ON o.id = w.wid WHERE " +
                                                    lane + " = ANY($3::int[]) AND " +
                                                    OutboxStatements::pending_sql("o.") +
                                                    " AND o.next_attempt_at <= now() AND NOT "
                                                    "coalesce(o.deliver_at > now(), false) "
                                                    "ORDER BY w.wkey LIMIT $2 FOR UPDATE OF o SKIP LOCKED"});
    // Where a walk of $1 keys (after $2) ends, and whether it reached the last key.
    out.push_back({"outbox_key_walk_end" + suffix,
                   walk("$1", from_cursor ? "$2" : "") + "SELECT wkey, step FROM walk ORDER BY step DESC LIMIT 1"});
  }
}

}  // namespace

// clock_timestamp(), not now(): the time the relay recorded the broker's acks,
// not the start of the claim transaction.
std::string OutboxStatements::mark_by_id(const std::string& schema, const StoreOptions& options) {
  const std::string target = schema + ".outbox";
  return (options.delete_on_publish ? "DELETE FROM " + target + " WHERE "
                                    : "UPDATE " + target + " SET published_at = clock_timestamp() WHERE ") +
         "id = ANY($1::bigint[])";
}

std::vector<OutboxStatements::Statement> OutboxStatements::define(const std::string& schema,
                                                                  const StoreOptions& options) {
  std::vector<Statement> out;
  const std::string select_list = OutboxStatements::claim_select_list();
  // Every statement is prepared on its first use (prepared_statement); the claims
  // and payloads come back in binary.
  // Due scheduled rows first (migration 0018), by deliver_at, through their own
  // index; then ready rows by id through theirs (0019): a row scheduled far ahead is
  // never read before it is due. Only the first statement of a claim takes scheduled
  // rows (claim_around's second would find its own locks, which SKIP LOCKED does not
  // skip, and claim them twice).
  const std::string scheduled = select_list + "FROM " + schema + ".outbox o WHERE " + OutboxStatements::pending_sql() +
                                " AND deliver_at <= now() AND next_attempt_at <= now() "
                                "ORDER BY deliver_at, id LIMIT $1 FOR UPDATE SKIP LOCKED";
  const std::string ready = select_list + "FROM " + schema + ".outbox o WHERE " + OutboxStatements::pending_sql() +
                            " AND deliver_at IS NULL AND next_attempt_at <= now() ";
  auto with_scheduled = [&](const std::string& range) {
    return "WITH s AS MATERIALIZED (" + scheduled + "), r AS (" + ready + range +
           "ORDER BY id LIMIT $1 - (SELECT count(*) FROM s) FOR UPDATE SKIP LOCKED) "
           "SELECT * FROM s UNION ALL SELECT * FROM r";
  };
  out.push_back({"outbox_claim", with_scheduled("")});
  out.push_back({"outbox_claim_below", with_scheduled("AND id < $2 ")});
  out.push_back({"outbox_claim_above", with_scheduled("AND id > $2 ")});
  out.push_back({"outbox_claim_above_ready", ready + "AND id > $2 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"});
  if (options.key_lanes > 0) add_key_walk(schema, options, select_list, out);
  // clock_timestamp(), not now(): the time the relay recorded the broker's acks,
  // not the start of the claim transaction.
  auto mark = [&](const std::string& target) {
    return options.delete_on_publish ? "DELETE FROM " + target + " WHERE "
                                     : "UPDATE " + target + " SET published_at = clock_timestamp() WHERE ";
  };
  // No "published_at IS NULL" in the marks: the rows are the acked ones, which this
  // transaction locked pending (FOR UPDATE) and nobody else can change; only the
  // best-effort mark by id after the batch's commit (mark_published_and_commit) runs
  // without the locks, and at worst stamps a row another relay published since a
  // second time, harmlessly. The guard
  // would imply the pending indexes' predicate, and the planner then scanned a whole
  // pending index and filtered it by ctid or id whenever its statistics counted few
  // pending rows against a batch of more than a few: at every mark in a backlog grown
  // since the last ANALYZE, 42 ms for 500 rows in 100 000 against 3.7 ms
  // (docs/perf/NOTEBOOK.md, "Round eleven").
  // By address (a TID scan): 500 index probes a batch fewer than by id, about
  // 1.5 us of PostgreSQL CPU per row (docs/perf/NOTEBOOK.md, "Round five"). ONLY: a
  // ctid names a version within one table, so it is never looked for in an
  // inheritance child or partition added since connect(); rows there are not found
  // by address, and the statement by id marks them. A version this transaction
  // changed since the claim is not found at its old address either.
  const std::string by_address = mark("ONLY " + schema + ".outbox") + "ctid = ANY($1::tid[])";
  out.push_back({"outbox_mark_published", by_address});
  out.push_back({"outbox_mark_published_by_id", mark_by_id(schema, options)});
  // The same mark as the first, sent with the batch's COMMIT (mark_published_and_commit).
  out.push_back({"outbox_mark_then_commit", by_address});
  out.push_back({"outbox_due", "SELECT EXISTS (SELECT 1 FROM " + schema + ".outbox WHERE " +
                                   OutboxStatements::pending_sql() +
                                   " AND deliver_at IS NULL AND next_attempt_at <= now()) OR EXISTS (SELECT 1 "
                                   "FROM " +
                                   schema + ".outbox WHERE " + OutboxStatements::pending_sql() +
                                   " AND deliver_at <= now() AND next_attempt_at <= now())"});
  // When the earliest scheduled row not yet due is due: the idle relay's timer.
  out.push_back({"outbox_next_scheduled", "SELECT extract(epoch FROM min(deliver_at) - now())::float8 FROM " + schema +
                                              ".outbox WHERE " + OutboxStatements::pending_sql() +
                                              " AND deliver_at > now()"});
  out.push_back({"outbox_mark_failed",
                 // attempts as written by hand may be anything: from below 0 it counts
                 // from 0, and at the int maximum it stays there (an overflow would
                 // fail the statement, and with it every row of the batch).
                 "UPDATE " + schema +
                     ".outbox o "
                     "SET attempts = LEAST(GREATEST(o.attempts, 0), 2147483646) + f.counted, "
                     "next_attempt_at = now() + f.retry_in_ms * interval '1 millisecond', "
                     "last_error = f.error, "
                     "parked_at = CASE WHEN f.counted = 1 AND GREATEST(o.attempts, 0) >= $5 - 1 THEN now() END, "
                     "refused_by_broker = f.refused "
                     "FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], $6::bool[]) "
                     "AS f(id, error, retry_in_ms, counted, refused) "
                     "WHERE o.id = f.id"});
  // Pending counts due rows only: a row scheduled for later is in the scheduled
  // backlog, and its wait is no lag. A due row's age runs from its deliver_at.
  out.push_back({"outbox_stats",
                 "SELECT count(*) FILTER (WHERE NOT coalesce(deliver_at > now(), false)), "
                 "coalesce(extract(epoch from now() - min(greatest(created_at, deliver_at)) FILTER (WHERE NOT "
                 "coalesce(deliver_at > now(), false) AND isfinite(created_at))), 0)::float8, "
                 "(SELECT count(*) FROM " +
                     schema +
                     ".outbox WHERE parked_at IS NOT NULL), count(*) FILTER (WHERE deliver_at > now()), "
                     "extract(epoch from min(deliver_at) FILTER (WHERE deliver_at > now()) - now())::float8 FROM " +
                     schema + ".outbox WHERE " + OutboxStatements::pending_sql()});
  return out;
}

}  // namespace relay
