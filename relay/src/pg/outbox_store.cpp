#include "pg/outbox_store.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/except>
#include <unordered_map>

#include "metrics/stage_cpu.h"
#include "outbox/one_line.h"
#include "outbox/pg_array.h"
#include "outbox/sql_identifier.h"
#include "pg/lane_manager.h"
#include "pg/pg_connect.h"

namespace relay {

StoreOptions StoreOptions::of(const RelaySettings& relay) {
  StoreOptions o;
  if (relay.ordering == Ordering::kPerKey) o.key_lanes = relay.lanes;
  o.park_key = relay.key_failure_policy == KeyFailurePolicy::kParkKey;
  o.delete_on_publish = relay.on_publish == OnPublish::kDelete;
  o.max_payload_bytes = static_cast<std::size_t>(relay.max_payload_bytes);
  return o;
}

OutboxStore::OutboxStore(PostgresConfig config, StoreOptions options)
    : config_(std::move(config)),
      options_(options),
      schema_(outbox::quoted_identifier(config_.schema, "postgres.schema")),
      payloads_sql_("SELECT id, payload FROM " + schema_ + ".outbox WHERE id = ANY($1::bigint[])") {}

OutboxStore::~OutboxStore() = default;

bool OutboxStore::connected() const { return session_ && session_->is_open(); }

void OutboxStore::disconnect() { session_.reset(); }

PgSession& OutboxStore::session() {
  if (!session_) throw pqxx::broken_connection("the relay's PostgreSQL session is not open");
  return *session_;
}

std::string OutboxStore::endpoint() const { return session_ ? session_->endpoint() : "(not connected)"; }

void OutboxStore::connect() {
  session_.reset();
  auto setup = open_relay_session(config_);
  setup->exec("SET statement_timeout = " + std::to_string(config_.statement_timeout_ms));
  setup->exec("SET idle_in_transaction_session_timeout = " + std::to_string(config_.idle_in_transaction_timeout_ms));
  if (!config_.synchronous_commit) setup->exec("SET synchronous_commit = off");
  // Every statement below is an index scan by design, at any table size. Their plans
  // are prepared once and cached generic: made while the outbox was small (a first
  // start, after a cleanup), the mark's was a sequential scan, and it stayed one as
  // the table grew, until autovacuum happened to invalidate it. Each batch then read
  // the whole table: 20-160 ms per mark at 10-100k rows, and a relay at 5 000 msg/s
  // fell behind for good (docs/perf/NOTEBOOK.md, "Round three").
  setup->exec("SET enable_seqscan = off");
  // Nor a bitmap scan: the generic plan of a claim around the batch in flight
  // (`id > $2`, `id < $2`) was a bitmap scan of the ready index's whole range and a
  // sort, which visits every row version still in the index (in delete and mark mode
  // every row since the last vacuum). Once the plan cache chose it the relay ran for
  // minutes at twice its PostgreSQL CPU per message and five times its median latency,
  // until a re-plan chose the index scan again (docs/perf/NOTEBOOK.md, "Round ten").
  setup->exec("SET enable_bitmapscan = off");
  // And planned once: with the default plan_cache_mode PostgreSQL may settle, after
  // an ANALYZE, on custom plans, made afresh at every execution. The soak's slow
  // regime was that: the claim session spent 44 % of its time in the planner and 10 %
  // running the claim, 1.7 x its PostgreSQL CPU per message, for as long as the
  // choice held (docs/perf/NOTEBOOK.md, "Round eleven"). The settings above keep the
  // generic plans index scans; a re-plan still follows each ANALYZE.
  setup->exec("SET plan_cache_mode = force_generic_plan");
  mark_by_address_ =
      !setup->exec("SELECT relhassubclass FROM pg_class WHERE oid = $1::regclass", {schema_ + ".outbox"}).boolean(0, 0);
  const std::string select_list = claim_select_list();
  // Every statement is prepared on its first use (prepared_statement); the claims
  // and payloads come back in binary.
  statements_.clear();
  // Due scheduled rows first (migration 0018), by deliver_at, through their own
  // index; then ready rows by id through theirs (0019): a row scheduled far ahead is
  // never read before it is due. Only the first statement of a claim takes scheduled
  // rows (claim_around's second would find its own locks, which SKIP LOCKED does not
  // skip, and claim them twice).
  const std::string scheduled = select_list + "FROM " + schema_ + ".outbox o WHERE " + pending_sql() +
                                " AND deliver_at <= now() AND next_attempt_at <= now() "
                                "ORDER BY deliver_at, id LIMIT $1 FOR UPDATE SKIP LOCKED";
  const std::string ready = select_list + "FROM " + schema_ + ".outbox o WHERE " + pending_sql() +
                            " AND deliver_at IS NULL AND next_attempt_at <= now() ";
  auto with_scheduled = [&](const std::string& range) {
    return "WITH s AS MATERIALIZED (" + scheduled + "), r AS (" + ready + range +
           "ORDER BY id LIMIT $1 - (SELECT count(*) FROM s) FOR UPDATE SKIP LOCKED) "
           "SELECT * FROM s UNION ALL SELECT * FROM r";
  };
  statements_.push_back({"outbox_claim", with_scheduled("")});
  statements_.push_back({"outbox_claim_below", with_scheduled("AND id < $2 ")});
  statements_.push_back({"outbox_claim_above", with_scheduled("AND id > $2 ")});
  statements_.push_back({"outbox_claim_above_ready",
                         ready + "AND id > $2 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"});
  if (options_.key_lanes > 0) add_key_walk(select_list);
  // clock_timestamp(), not now(): the time the relay recorded the broker's acks,
  // not the start of the claim transaction.
  auto mark = [&](const std::string& target) {
    return options_.delete_on_publish ? "DELETE FROM " + target + " WHERE "
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
  const std::string by_address = mark("ONLY " + schema_ + ".outbox") + "ctid = ANY($1::tid[])";
  statements_.push_back({"outbox_mark_published", by_address});
  mark_by_id_sql_ = mark(schema_ + ".outbox") + "id = ANY($1::bigint[])";
  statements_.push_back({"outbox_mark_published_by_id", mark_by_id_sql_});
  // The same mark as the first, sent with the batch's COMMIT (mark_published_and_commit).
  statements_.push_back({"outbox_mark_then_commit", by_address});
  statements_.push_back({"outbox_due", "SELECT EXISTS (SELECT 1 FROM " + schema_ + ".outbox WHERE " + pending_sql() +
                                           " AND deliver_at IS NULL AND next_attempt_at <= now()) OR EXISTS (SELECT 1 "
                                           "FROM " +
                                           schema_ + ".outbox WHERE " + pending_sql() +
                                           " AND deliver_at <= now() AND next_attempt_at <= now())"});
  // When the earliest scheduled row not yet due is due: the idle relay's timer.
  statements_.push_back({"outbox_next_scheduled", "SELECT extract(epoch FROM min(deliver_at) - now())::float8 FROM " +
                                                      schema_ + ".outbox WHERE " + pending_sql() +
                                                      " AND deliver_at > now()"});
  statements_.push_back(
      {"outbox_mark_failed",
       // attempts as written by hand may be anything: from below 0 it counts
       // from 0, and at the int maximum it stays there (an overflow would
       // fail the statement, and with it every row of the batch).
       "UPDATE " + schema_ +
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
  statements_.push_back(
      {"outbox_stats",
       "SELECT count(*) FILTER (WHERE NOT coalesce(deliver_at > now(), false)), "
       "coalesce(extract(epoch from now() - min(greatest(created_at, deliver_at)) FILTER (WHERE NOT "
       "coalesce(deliver_at > now(), false) AND isfinite(created_at))), 0)::float8, "
       "(SELECT count(*) FROM " +
           schema_ +
           ".outbox WHERE parked_at IS NOT NULL), count(*) FILTER (WHERE deliver_at > now()), "
           "extract(epoch from min(deliver_at) FILTER (WHERE deliver_at > now()) - now())::float8 FROM " +
           schema_ + ".outbox WHERE " + pending_sql()});
  session_ = std::move(setup);
}

bool OutboxStore::has_due_rows() { return session().exec_prepared(prepared_statement("outbox_due"), {}).boolean(0, 0); }

std::optional<double> OutboxStore::next_scheduled_in() {
  const auto r = session().exec_prepared(prepared_statement("outbox_next_scheduled"), {});
  if (r.is_null(0, 0)) return std::nullopt;
  return r.float8(0, 0);
}

std::vector<ClaimedRow> OutboxStore::claim(BatchTransaction& tx, int limit) {
  return decode_claim(run_claim(tx, "outbox_claim", {std::to_string(limit)}));
}

// Two statements, each an index range scan in id order: below the range (usually
// few rows: late commits, retries come due), then above it for the rest.
std::vector<ClaimedRow> OutboxStore::claim_around(BatchTransaction& tx, int limit, std::int64_t skip_from,
                                                  std::int64_t skip_to) {
  auto rows = decode_claim(run_claim(tx, "outbox_claim_below", {std::to_string(limit), std::to_string(skip_from)}));
  const auto rest = limit - static_cast<int>(rows.size());
  if (rest <= 0) return rows;
  auto above = decode_claim(run_claim(tx, "outbox_claim_above_ready", {std::to_string(rest), std::to_string(skip_to)}));
  rows.insert(rows.end(), std::make_move_iterator(above.begin()), std::make_move_iterator(above.end()));
  return rows;
}

std::vector<ClaimedRow> OutboxStore::claim_above(BatchTransaction& tx, int limit, std::int64_t skip_to) {
  return decode_claim(run_claim(tx, "outbox_claim_above", {std::to_string(limit), std::to_string(skip_to)}));
}

// The statement `name` of statements_, prepared on this session on first use.
// Each is marked prepared only once its own PREPARE succeeded: one that failed (a
// timeout behind a migration's lock) is prepared again at its next use, and one that
// succeeded is never prepared twice (42P05 at every use, for good).
const std::string& OutboxStore::prepared_statement(const char* name) {
  for (auto& statement : statements_) {
    if (statement.name != name) continue;
    if (!statement.prepared) {
      session().prepare(statement.name, statement.sql);
      statement.prepared = true;
    }
    return statement.name;
  }
  throw pqxx::usage_error(std::string("no statement named ") + name);
}

// A batch's transaction begins with its claim, in the same round trip.
PgResult OutboxStore::run_claim(BatchTransaction& tx, const char* name, const PgSession::Params& params) {
  return tx.begin_with(prepared_statement(name), params);
}

// The per_key claim is a loose index scan over outbox_pending_key_idx: a recursive
// walk that jumps from each pending key to the next one's lowest pending id (its
// head), up to $3 keys from $4 (or from the first key), then claims the due heads of
// the relay's lanes. Heads are found on committed state: a head another batch holds
// (locked, not yet marked) is skipped by SKIP LOCKED, and the walk never looks past a
// key's head, so its key waits. With park_key a parked head blocks its key; with
// park_message parked rows are not heads. A head another batch marked after this
// statement's snapshot is rechecked on its newest version and not claimed again.
void OutboxStore::add_key_walk(const std::string& select_list) {
  // Every step is one probe of outbox_pending_key_idx ((ordering_key, id) WHERE
  // published_at IS NULL): the walk's predicate is exactly the index's, so the
  // planner takes it in key order whatever its statistics say. (A "parked_at IS
  // NULL" here let it pick outbox_pending_idx instead and sort every pending row at
  // each step: 100 ms a claim at 6,000 pending rows, against 1 ms.)
  // park_key: a key's head is its lowest unpublished row, parked or not; a parked
  // head is dropped by the final filter and so blocks its key. park_message: a
  // parked row is a step of its own (wparked), after which the walk goes on to the
  // next row of the same key, whose first unparked row is then its head.
  const std::string parked = options_.park_key ? "false" : "parked_at IS NOT NULL";
  const std::string next = "SELECT ordering_key, id, " + parked + " FROM " + schema_ +
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
  const std::string lane = LaneManager::lane_sql("o.ordering_key", std::to_string(options_.key_lanes));
  for (bool from_cursor : {false, true}) {
    const std::string suffix = from_cursor ? "_from" : "_start";
    // $1 keys to walk, $2 limit, $3 lanes, $4 cursor.
    statements_.push_back({"outbox_key_heads" + suffix, walk("$1", from_cursor ? "$4" : "") + select_list +
                                                            "FROM walk w JOIN " + schema_ +
                                                            ".outbox o ON o.id = w.wid WHERE " + lane +
                                                            " = ANY($3::int[]) AND " + pending_sql("o.") +
                                                            " AND o.next_attempt_at <= now() AND NOT "
                                                            "coalesce(o.deliver_at > now(), false) "
                                                            "ORDER BY w.wkey LIMIT $2 FOR UPDATE OF o SKIP LOCKED"});
    // Where a walk of $1 keys (after $2) ends, and whether it reached the last key.
    statements_.push_back({"outbox_key_walk_end" + suffix,
                           walk("$1", from_cursor ? "$2" : "") +
                               "SELECT wkey, step FROM walk ORDER BY step DESC LIMIT 1"});
  }
}

std::vector<ClaimedRow> OutboxStore::claim_key_heads(BatchTransaction& tx, int limit, const std::vector<int>& lanes,
                                                     KeyCursor& cursor) {
  if (lanes.empty()) return {};
  std::vector<std::int64_t> lane_ids(lanes.begin(), lanes.end());
  const std::string lane_array = outbox::pg::bigint_array(lane_ids);
  // Enough keys for a full batch when keys spread evenly over the lanes.
  const long keys_per_walk = std::min<long>(1'000'000, std::max<long>(limit, 2L * limit * options_.key_lanes /
                                                                                 static_cast<long>(lanes.size())));
  bool wrapped = cursor.at_start;
  // Bounded, so a claim returns in bounded time; a pass left unfinished resumes at
  // the next claim from the cursor.
  for (int walks = 0; walks < 64; ++walks) {
    auto rows = cursor.at_start
                    ? decode_claim(run_claim(tx, "outbox_key_heads_start",
                                             {std::to_string(keys_per_walk), std::to_string(limit), lane_array}))
                    : decode_claim(run_claim(tx, "outbox_key_heads_from",
                                             {std::to_string(keys_per_walk), std::to_string(limit), lane_array,
                                              cursor.after}));
    if (!rows.empty()) {
      cursor = KeyCursor{false, rows.back().ordering_key};
      return rows;
    }
    const auto end = cursor.at_start ? tx.exec_prepared(prepared_statement("outbox_key_walk_end_start"),
                                                        {std::to_string(keys_per_walk)})
                                     : tx.exec_prepared(prepared_statement("outbox_key_walk_end_from"),
                                                        {std::to_string(keys_per_walk), cursor.after});
    if (end.rows() == 0 || end.int4(0, 1) < keys_per_walk) {  // reached the last key
      cursor = KeyCursor{};
      if (wrapped) return {};
      wrapped = true;
    } else {
      cursor = KeyCursor{false, std::string(end.bytes(0, 0))};
    }
  }
  return {};
}

std::string OutboxStore::pending_sql(const std::string& alias) {
  return alias + "published_at IS NULL AND " + alias + "parked_at IS NULL";
}

// The claim's columns, named: the SELECT list and the decoder use the same names.
// Both claims call the outbox `o` (the key walk joins it to its steps).
std::string OutboxStore::claim_select_list() {
  return "SELECT id, o.ctid AS ctid, message_id::text AS message_id, exchange, routing_key, message_type, "
         "ordering_key, key_seq, "
         "content_type, headers::text AS headers, correlation_id, "
         "CASE WHEN octet_length(payload) <= " +
         std::to_string(kInlinePayloadBytes) +
         " THEN payload END "
         "AS inline_payload, attempts, date_part('epoch', created_at) AS created_epoch, "
         "date_part('epoch', deliver_at) AS due_epoch, "
         "octet_length(payload) AS payload_bytes, "
         "refused_by_broker AS refused_before ";
}

// Column numbers of claim_select_list() in a result, looked up once per result.
struct OutboxStore::ClaimColumns {
  explicit ClaimColumns(const PgResult& q)
      : id(q.column("id")),
        ctid(q.column("ctid")),
        message_id(q.column("message_id")),
        exchange(q.column("exchange")),
        routing_key(q.column("routing_key")),
        message_type(q.column("message_type")),
        ordering_key(q.column("ordering_key")),
        key_seq(q.column("key_seq")),
        content_type(q.column("content_type")),
        headers(q.column("headers")),
        correlation_id(q.column("correlation_id")),
        inline_payload(q.column("inline_payload")),
        attempts(q.column("attempts")),
        created_epoch(q.column("created_epoch")),
        due_epoch(q.column("due_epoch")),
        payload_bytes(q.column("payload_bytes")),
        refused_before(q.column("refused_before")) {}
  int id, ctid, message_id, exchange, routing_key, message_type, ordering_key, key_seq, content_type, headers,
      correlation_id, inline_payload, attempts, created_epoch, due_epoch, payload_bytes, refused_before;
};

// Each row on its own: a row whose columns cannot be decoded is returned with
// `invalid` set (and is failed on its own as an attempt), never by throwing, which
// would throw the whole claim away and halt every relay on one row.
std::vector<ClaimedRow> OutboxStore::decode_claim(const PgResult& q) {
  const StageCpu::Scope cpu(CpuStage::kDecode);  // the relay loop's CPU by stage (a no-op elsewhere)
  std::vector<ClaimedRow> rows;
  if (q.rows() == 0) return rows;
  const ClaimColumns c(q);
  rows.reserve(static_cast<std::size_t>(q.rows()));
  for (int i = 0; i < q.rows(); ++i) {
    ClaimedRow row;
    // Columns the relay needs to settle the row: NOT NULL and typed by the table.
    row.id = q.int8(i, c.id);
    row.ctid = q.tid(i, c.ctid);
    row.ordering_key = q.bytes(i, c.ordering_key);
    row.attempts = q.int4(i, c.attempts);
    row.refused_before = q.boolean(i, c.refused_before);
    try {
      decode_message_columns(q, i, c, row);
      if (!row.invalid && row.payload_bytes > options_.max_payload_bytes) {
        row.invalid = "column payload: " + std::to_string(row.payload_bytes) +
                      " bytes, above relay.max_payload_bytes (" + std::to_string(options_.max_payload_bytes) +
                      "): not fetched";
        row.payload.clear();
        row.payload_loaded = true;  // nothing to fetch: it will not be sent
      }
    } catch (const std::exception& e) {
      if (!row.invalid) row.invalid = std::string("cannot decode the row: ") + e.what();
      row.headers.clear();
      row.payload.clear();
      row.payload_loaded = true;  // nothing to fetch: it will not be sent
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// What the relay sends; sets row.invalid (or throws) when a column cannot be sent.
// Text columns come as their bytes, the payload as stored (binary results).
void OutboxStore::decode_message_columns(const PgResult& q, int i, const ClaimColumns& c, ClaimedRow& row) {
  row.message_id = q.bytes(i, c.message_id);
  row.exchange = q.bytes(i, c.exchange);
  row.routing_key = q.bytes(i, c.routing_key);
  row.type = q.bytes(i, c.message_type);
  row.content_type = q.bytes(i, c.content_type);
  const std::string_view headers = q.bytes(i, c.headers);
  if (headers != "{}") {
    const auto parsed = nlohmann::json::parse(headers, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) {
      row.invalid = "column headers: must be a JSON object of string values, got a JSON " +
                    std::string(parsed.is_discarded() ? "text that does not parse" : parsed.type_name());
      return;
    }
    for (auto it = parsed.cbegin(); it != parsed.cend(); ++it) {
      if (!it.value().is_string()) {
        row.invalid = "column headers: the value of header '" + outbox::one_line(it.key(), 64) +
                      "' must be a string, got a JSON " + it.value().type_name();
        return;
      }
      row.headers.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  if (!q.is_null(i, c.correlation_id)) row.correlation_id = q.bytes(i, c.correlation_id);
  if (!q.is_null(i, c.key_seq)) {
    // Only with the 0016 trigger off (a restore, session_replication_role = replica)
    // can a row hold a number the trigger would not have given it.
    row.key_seq = q.int8(i, c.key_seq);
    if (*row.key_seq < 1 || row.ordering_key.empty()) {
      row.invalid = "column key_seq: " + std::to_string(*row.key_seq) +
                    (row.ordering_key.empty() ? " on a row without an ordering key"
                                              : " is not a sequence number (1 or more)") +
                    " (it is assigned at enqueue by migration 0016's trigger)";
      return;
    }
  }
  row.payload_bytes = static_cast<std::size_t>(q.int4(i, c.payload_bytes));
  row.payload_loaded = !q.is_null(i, c.inline_payload);
  if (row.payload_loaded) row.payload = q.bytes(i, c.inline_payload);
  // '-infinity' or 'infinity' is no point in time: neither an AMQP timestamp nor the
  // latency metrics can use it. A finite created_at is kept, one before 1970 (a row
  // written by hand) too: with amqp.send_timestamp false it is published as any
  // other, and when the timestamp is sent AmqpPublisher refuses it as the row's own
  // fault (an AMQP timestamp is unsigned). Its metrics are its age, as any row's.
  const double created = q.float8(i, c.created_epoch);
  if (!std::isfinite(created) || std::fabs(created) > 1e15) {  // PostgreSQL's are within +-1e13
    row.invalid = "column created_at: " + std::string(created < 0 ? "-infinity" : "infinity") +
                  " is no point in time (the AMQP timestamp and the latency metrics need one)";
    return;
  }
  row.created_unix = created;
  row.created_unix_s = static_cast<std::int64_t>(std::floor(created));  // 1969-12-31 23:59:59.5 is -1
  // Scheduled for later than it was written: its wait until then is no latency.
  // (The table refuses an infinite deliver_at; the claim takes only past ones.)
  if (!q.is_null(i, c.due_epoch)) {
    const double due = q.float8(i, c.due_epoch);
    if (std::isfinite(due) && due > created) {
      row.created_unix = due;
      row.scheduled = true;
    }
  }
}

std::size_t OutboxStore::load_payloads(BatchTransaction& tx, std::vector<ClaimedRow>& rows, std::size_t first,
                                       std::size_t max_bytes) {
  std::vector<std::int64_t> ids;
  std::unordered_map<std::int64_t, std::size_t> index;
  std::size_t bytes = 0, end = first;
  for (; end < rows.size(); ++end) {
    if (rows[end].payload_loaded) continue;
    if (!ids.empty() && bytes + rows[end].payload_bytes > max_bytes) break;
    bytes += rows[end].payload_bytes;
    ids.push_back(rows[end].id);
    index.emplace(rows[end].id, end);
  }
  if (ids.empty()) return end;
  // Binary results: the payload's bytes as stored, with no escaping pass on either side.
  const PgResult q = tx.exec(payloads_sql_, {outbox::pg::bigint_array(ids)});
  if (q.columns() != 2) throw pqxx::usage_error("payload fetch: expected 2 columns");
  for (int i = 0; i < q.rows(); ++i) {
    auto& row = rows[index.at(q.int8(i, 0))];
    const auto payload = q.bytes(i, 1);
    row.payload.assign(payload.data(), payload.size());
    row.payload_loaded = true;
  }
  return end;
}

void OutboxStore::mark_published(BatchTransaction& tx, const std::vector<const ClaimedRow*>& rows) {
  if (rows.empty()) return;
  if (mark_by_address_) {
    std::vector<std::string> ctids;
    ctids.reserve(rows.size());
    for (const auto* r : rows) ctids.push_back(r->ctid);
    const auto marked =
        tx.exec_prepared(prepared_statement("outbox_mark_published"), {outbox::pg::text_array(ctids)}).affected_rows();
    if (marked == rows.size()) return;
  }
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto* r : rows) ids.push_back(r->id);
  tx.exec_prepared(prepared_statement("outbox_mark_published_by_id"), {outbox::pg::bigint_array(ids)});
}

void OutboxStore::mark_published_and_commit(BatchTransaction& tx, const std::vector<const ClaimedRow*>& rows) {
  if (rows.empty() || !mark_by_address_ || !tx.begun()) {
    mark_published(tx, rows);
    tx.commit();
    return;
  }
  std::vector<std::string> ctids;
  ctids.reserve(rows.size());
  for (const auto* r : rows) ctids.push_back(r->ctid);
  const auto marked = tx.commit_after(prepared_statement("outbox_mark_then_commit"), {outbox::pg::text_array(ctids)});
  if (marked == rows.size()) return;
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto* r : rows) ids.push_back(r->id);
  // Best effort, on its own (committed at once): a row it misses stays pending and is
  // published again, which at-least-once allows; the batch itself has committed.
  try {
    tx.session().exec(mark_by_id_sql_, {outbox::pg::bigint_array(ids)});
  } catch (const std::exception&) {
  }
}

void OutboxStore::mark_failed(BatchTransaction& tx, const std::vector<FailedRow>& rows, int max_attempts) {
  if (rows.empty()) return;
  std::vector<std::int64_t> ids, delays, counted;
  std::vector<std::string> errors;
  std::string refused;  // a bool[] literal's elements
  for (const auto& r : rows) {
    ids.push_back(r.id);
    errors.push_back(outbox::one_line(r.error));  // valid UTF-8, or the statement fails (22021)
    delays.push_back(r.retry_in_ms);
    counted.push_back(r.counts_as_attempt ? 1 : 0);
    refused += std::string(refused.empty() ? "" : ",") + (r.refused_by_broker ? "t" : "f");
  }
  tx.exec_prepared(prepared_statement("outbox_mark_failed"),
                   {outbox::pg::bigint_array(ids), outbox::pg::text_array(errors), outbox::pg::bigint_array(delays),
                    outbox::pg::bigint_array(counted), std::to_string(max_attempts), "{" + refused + "}"});
}

PendingStats OutboxStore::stats() {
  const auto r = session().exec_prepared(prepared_statement("outbox_stats"), {});
  PendingStats stats{r.int8(0, 0), r.int8(0, 2), r.float8(0, 1), r.int8(0, 3), std::nullopt};
  if (!r.is_null(0, 4)) stats.next_scheduled_in_s = r.float8(0, 4);
  return stats;
}

}  // namespace relay
