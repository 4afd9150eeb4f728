// outbox-relay dead list / dead requeue: the parked rows (failed relay.max_attempts
// times), shown and sent back to pending.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>

#include "admin/admin_args.h"
#include "config/preflight.h"
#include "outbox/one_line.h"
#include "outbox/pg_array.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

// An age in seconds, or nullopt where the time is infinite (a row written by hand).
std::optional<double> seconds_of(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<double>(f.as<double>());
}
nlohmann::json seconds_or_null(const std::optional<double>& s) { return s ? nlohmann::json(*s) : nlohmann::json(); }
std::string age_text(const std::optional<double>& s) { return s ? human_seconds(*s) : "-"; }

// The characters of last_error read per row: a value written by hand may hold
// hundreds of megabytes, and each listed row would be fetched and printed whole.
constexpr int kLastErrorShown = 2000;

// One row of `dead list`, read by column name: a reordered SELECT list cannot swap
// fields (a missing column throws).
struct ParkedRow {
  std::int64_t id = 0;
  std::string message_id;
  std::string type;
  int attempts = 0;
  std::string last_error;  // the first kLastErrorShown characters
  bool last_error_cut = false;
  std::optional<double> age_s, parked_for_s;
};

ParkedRow parked_row(const pqxx::row& r) {
  ParkedRow p;
  p.id = r["id"].as<std::int64_t>();
  p.message_id = r["message_id"].c_str();
  p.type = r["message_type"].c_str();
  p.attempts = r["attempts"].as<int>();
  p.last_error = r["last_error"].c_str();
  p.last_error_cut = r["last_error_cut"].as<bool>();
  p.age_s = seconds_of(r["age_s"]);
  p.parked_for_s = seconds_of(r["parked_for_s"]);
  return p;
}

constexpr const char* kDeadHelp =
    "usage: outbox-relay dead list --config FILE [--type T] [--limit N] [--json]\n"
    "       outbox-relay dead requeue --config FILE --id ID... [--json]\n"
    "       outbox-relay dead requeue --config FILE (--type T | --all) [--until TIME]\n"
    "                                 (--dry-run | --expect N) [--json]\n"
    "\n"
    "A row is parked when it failed relay.max_attempts times for a reason of its own\n"
    "(nacked, unroutable, its exchange missing); the relay never claims it again.\n"
    "\n"
    "  list      parked rows, oldest first: outbox id, message id, type, attempts,\n"
    "            age (since enqueue), time parked, last error; with relay.ordering\n"
    "            per_key and park_key also the keys blocked behind a parked row\n"
    "    --type T    only rows of message type T\n"
    "    --limit N   at most N rows (default 1000); the total is always printed\n"
    "  requeue   makes parked rows pending again, due now, with attempts reset to 0\n"
    "            (last_error is kept until the next attempt); the running relay\n"
    "            publishes them with their own message ids\n"
    "    --id ID...  message ids (UUID) or outbox ids; every one must be parked, or\n"
    "                nothing changes (exit 2)\n"
    "    --type T    every parked row of message type T\n"
    "    --all       every parked row\n"
    "                --type and --all change rows only with --expect N; without it,\n"
    "                they print what matches by type and change nothing (exit 2)\n"
    "    --until TIME  with --type or --all, rows parked at or before TIME: an RFC\n"
    "                3339 time (without an offset, UTC) or an age (90m, 12h, 7d).\n"
    "                Default: the moment the command runs, printed with the count;\n"
    "                repeat it with --expect so rows parked since do not move it\n"
    "    --expect N  the number of rows the selection must match, as a dry run\n"
    "                printed it; any other number changes nothing (exit 2)\n"
    "    --dry-run   count what would be requeued, change nothing\n"
    "  --json    one JSON value on stdout\n"
    "\n"
    "exit codes: 0 done (or dry run), 1 PostgreSQL failed, 2 bad usage,\n"
    "configuration, an id that is unknown or not parked, --type or --all without\n"
    "--expect, or a count other than --expect\n";

std::string table_of(const RelayConfig& config) {
  return outbox::quoted_identifier(config.postgres.schema, "postgres.schema") + ".outbox";
}

// relay.ordering per_key with park_key: keys whose head (lowest unpublished row)
// is parked wait for an operator; each with how many messages wait behind it.
struct BlockedKey {
  std::string key;
  std::int64_t head_id;
  std::int64_t waiting;
};

std::vector<BlockedKey> blocked_keys(pqxx::transaction_base& tx, const RelayConfig& config) {
  std::vector<BlockedKey> out;
  if (config.relay.ordering != Ordering::kPerKey || config.relay.key_failure_policy != KeyFailurePolicy::kParkKey)
    return out;
  const auto table = table_of(config);
  auto rows = tx.exec("SELECT h.ordering_key, h.id AS head_id, (SELECT count(*) FROM " + table +
                      " w "
                      "WHERE w.ordering_key = h.ordering_key AND w.published_at IS NULL AND w.id > h.id) AS waiting "
                      "FROM (SELECT DISTINCT ON (ordering_key) ordering_key, id, "
                      "parked_at FROM " +
                      table +
                      " WHERE published_at IS NULL ORDER BY ordering_key, id) h "
                      "WHERE h.parked_at IS NOT NULL ORDER BY h.id LIMIT 1000");
  for (const auto& r : rows)
    out.push_back({r["ordering_key"].c_str(), r["head_id"].as<std::int64_t>(), r["waiting"].as<std::int64_t>()});
  return out;
}

int dead_list(const AdminArgs& args, const RelayConfig& config) {
  const auto limit = args.integer("--limit", 1000, 1, 10000000);
  const auto type = args.value("--type");
  auto conn_owner = connect_postgres(config.postgres);
  auto& conn = *conn_owner;
  pqxx::read_transaction tx(conn);
  const std::string where = " WHERE parked_at IS NOT NULL AND ($1::text IS NULL OR message_type = $1::text)";
  const auto total = outbox::pgx::exec_params1(tx, "SELECT count(*) AS total FROM " + table_of(config) + where,
                                               type)["total"]
                         .as<std::int64_t>();
  auto result = outbox::pgx::exec_params(
      tx,
      "SELECT id, message_id::text AS message_id, message_type, attempts, "
      "left(coalesce(last_error, ''), " +
          std::to_string(kLastErrorShown) +
          ") AS last_error, "
          "coalesce(char_length(last_error), 0) > " +
          std::to_string(kLastErrorShown) +
          " AS last_error_cut, "
          "CASE WHEN isfinite(created_at) THEN extract(epoch from now() - created_at)::float8 END AS age_s, "
          "CASE WHEN isfinite(parked_at) THEN extract(epoch from now() - parked_at)::float8 END AS parked_for_s "
          "FROM " +
          table_of(config) + where + " ORDER BY id LIMIT $2",
      type, limit);
  std::vector<ParkedRow> rows;
  rows.reserve(result.size());
  for (const auto& r : result) rows.push_back(parked_row(r));
  if (args.json()) {
    auto list = nlohmann::json::array();
    for (const auto& r : rows)
      list.push_back({{"id", r.id},
                      {"message_id", r.message_id},
                      {"type", r.type},
                      {"attempts", r.attempts},
                      {"last_error", r.last_error},
                      {"last_error_cut", r.last_error_cut},
                      {"age_s", seconds_or_null(r.age_s)},
                      {"parked_for_s", seconds_or_null(r.parked_for_s)}});
    auto blocked = nlohmann::json::array();
    for (const auto& b : blocked_keys(tx, config))
      blocked.push_back({{"ordering_key", b.key}, {"head_id", b.head_id}, {"waiting", b.waiting}});
    // ASCII only (\uXXXX): row text may hold C1 controls, which a terminal acts on.
    std::cout << nlohmann::json{{"total", total}, {"rows", list}, {"blocked_keys", blocked}}.dump(-1, ' ', true)
              << "\n";
    return kExitOk;
  }
  const auto blocked = blocked_keys(tx, config);
  if (!blocked.empty()) {
    std::printf("%zu key(s) blocked behind a parked message (relay.key_failure_policy park_key):\n", blocked.size());
    for (const auto& b : blocked)
      std::printf("  key %-40s parked row %-10lld %lld message(s) waiting\n", outbox::one_line(b.key, 40).c_str(),
                  static_cast<long long>(b.head_id), static_cast<long long>(b.waiting));
  }
  std::printf("%lld parked row(s)%s\n", static_cast<long long>(total),
              static_cast<std::int64_t>(rows.size()) < total ? ", oldest shown first" : "");
  if (rows.empty()) return kExitOk;
  std::printf("%-10s %-36s %-24s %8s %12s %12s  %s\n", "id", "message id", "type", "attempts", "age", "parked for",
              "last error");
  for (const auto& r : rows)
    std::printf("%-10lld %-36s %-24s %8d %12s %12s  %s\n", static_cast<long long>(r.id), r.message_id.c_str(),
                outbox::one_line(r.type, 24).c_str(), r.attempts, age_text(r.age_s).c_str(),
                age_text(r.parked_for_s).c_str(), outbox::one_line(r.last_error, 300).c_str());
  if (static_cast<std::int64_t>(rows.size()) < total)
    std::printf("... %lld more (raise --limit)\n", static_cast<long long>(total - rows.size()));
  return kExitOk;
}

void check_requeue_usage(const AdminArgs& args) {
  const int selectors = args.has("--id") + args.has("--type") + args.has("--all");
  if (selectors != 1) throw UsageError("dead requeue needs exactly one of --id ID..., --type T or --all");
  parse_id_flags(args.all("--id"));
  args.integer("--expect", 0, 0, 100000000);
  if (parse_time_bound(args, "--until").given() && args.has("--id"))
    throw UsageError("--until bounds a requeue by --type or --all; not with --id");
}

// The parked rows a requeue selects. Every parameter appears in the text (PostgreSQL
// must infer each one's type); an unused criterion is passed as NULL or empty.
constexpr const char* kRequeueWhere =
    " WHERE parked_at IS NOT NULL "
    "AND ($1 OR id = ANY($2::bigint[]) OR message_id = ANY($3::uuid[]) OR message_type = $4::text) "
    "AND ($5::timestamptz IS NULL OR parked_at <= $5::timestamptz) "
    "AND ($6::bigint IS NULL OR parked_at <= now() - $6::bigint * interval '1 second')";

pqxx::result exec_requeue_sql(pqxx::work& tx, const std::string& sql, const AdminArgs& args, const IdSelection& ids,
                              const TimeBound& until) {
  return outbox::pgx::exec_params(tx, sql, args.has("--all"), outbox::pg::bigint_array(ids.ids),
                                  outbox::pg::text_array(ids.message_ids), args.value("--type"), until.time,
                                  until.age_s);
}

// What a selection matches: the count, and by message type (the ten largest) for the
// operator to check before anything changes. The window sums run before the LIMIT, so
// the total counts every type.
struct Matches {
  std::int64_t count = 0;
  std::string by_type;
};

Matches count_matches(pqxx::work& tx, const std::string& table, const AdminArgs& args, const IdSelection& ids,
                      const TimeBound& until) {
  auto rows = exec_requeue_sql(tx,
                               "SELECT message_type, count(*) AS count, sum(count(*)) OVER ()::bigint AS total, "
                               "count(*) OVER () AS types "
                               "FROM " +
                                   table + kRequeueWhere + " GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
                               args, ids, until);
  Matches m;
  if (rows.empty()) return m;
  m.count = rows[0]["total"].as<std::int64_t>();
  m.by_type = by_type_text(rows);
  const auto types = rows[0]["types"].as<std::int64_t>();
  if (types > static_cast<std::int64_t>(rows.size()))
    m.by_type += " and " + std::to_string(types - rows.size()) + " more type(s)";
  return m;
}

int dead_requeue(const AdminArgs& args, const RelayConfig& config) {
  const auto selection = parse_id_flags(args.all("--id"));
  const bool dry_run = args.has("--dry-run");
  const auto table = table_of(config);
  auto conn_owner = connect_postgres(config.postgres);
  auto& conn = *conn_owner;
  pqxx::work tx(conn);
  // A bulk requeue ends now unless --until says otherwise, and says so: the run that
  // confirms the count repeats the bound, so rows parked in between do not change it.
  // An --until without an offset means UTC whatever the session's time zone.
  tx.exec("SET LOCAL TimeZone = 'UTC'");
  auto until = parse_time_bound(args, "--until");
  if (!args.has("--id") && !until.given()) until.time = server_now_utc(tx);
  if (args.has("--id")) {
    // Every given id must name a parked row.
    auto problems = check_ids(tx, table, selection, [](const IdRow& r) -> std::optional<std::string> {
      if (!r.parked) return "is not parked";
      return std::nullopt;
    });
    if (!problems.empty()) {
      for (const auto& p : problems) std::cerr << "dead requeue: " << outbox::one_line(p) << "\n";
      std::cerr << "dead requeue: nothing changed\n";
      return kExitUsage;
    }
  }
  const auto matches = count_matches(tx, table, args, selection, until);
  if (!args.has("--id") && matches.count > 0) std::cerr << "dead requeue: " << matches.by_type << "\n";
  if (!dry_run)
    if (auto why = unconfirmed_selection(args, matches.count, !args.has("--id"), "parked", "requeue them",
                                         until.time.value_or(""))) {
      std::cerr << "dead requeue: " << *why << "\n";
      return kExitUsage;
    }
  std::int64_t requeued = 0;
  if (!dry_run) {
    // Pending again and due now; attempts restart so a row gets a full set of retries.
    auto r = exec_requeue_sql(tx,
                              "UPDATE " + table + " SET parked_at = NULL, attempts = 0, next_attempt_at = now()" +
                                  kRequeueWhere + " RETURNING id",
                              args, selection, until);
    // A row parked since the count: what was confirmed is no longer what would change.
    if (static_cast<std::int64_t>(r.size()) != matches.count)
      throw std::runtime_error("the selection changed while requeueing; nothing changed, try again");
    tx.commit();
    requeued = matches.count;
  }
  if (args.json()) {
    nlohmann::json j{{"dry_run", dry_run}, {"matched", matches.count}, {"requeued", requeued}};
    if (!args.has("--id")) j["until"] = args.value("--until").value_or(until.time.value_or(""));
    std::cout << j.dump() << "\n";
  } else if (dry_run) {
    std::cout << matches.count << " parked row(s) would be requeued (dry run, nothing changed)";
    if (!args.has("--id") && !args.has("--until") && matches.count > 0)
      std::cout << "; to requeue them: --until " << *until.time << " --expect " << matches.count;
    std::cout << "\n";
  } else std::cout << requeued << " row(s) back to pending; the running relay publishes them\n";
  return kExitOk;
}

}  // namespace

int cmd_dead(const Args& raw) {
  if (raw.empty() || raw[0] == "--help" || raw[0] == "-h") {
    if (raw.empty()) throw UsageError("dead needs a subcommand: list or requeue");
    std::cout << kDeadHelp;
    return kExitOk;
  }
  const std::string sub = raw[0];
  if (sub != "list" && sub != "requeue")
    throw UsageError("unknown dead subcommand '" + outbox::one_line(sub, 40) + "' (expected list or requeue)");
  const Args rest(raw.begin() + 1, raw.end());
  const auto args = sub == "list" ? AdminArgs("dead list", rest, {{"--type", true}, {"--limit", true}, {"--json"}})
                                  : AdminArgs("dead requeue", rest,
                                              {{"--id", true, true},
                                               {"--type", true},
                                               {"--all"},
                                               {"--until", true},
                                               {"--expect", true},
                                               {"--dry-run"},
                                               {"--json"}});
  if (args.help()) {
    std::cout << kDeadHelp;
    return kExitOk;
  }
  // Usage errors first: nothing is read or written for a bad command line.
  if (sub == "list") args.integer("--limit", 1000, 1, 10000000);
  else check_requeue_usage(args);
  auto config = load_config_or_report(args.config_path());
  if (!config) return kExitUsage;
  try {
    return sub == "list" ? dead_list(args, *config) : dead_requeue(args, *config);
  } catch (const std::exception& e) {
    std::cerr << "dead " << sub << " failed: " << admin_failure_text(e, config->postgres.schema) << "\n";
    return kExitFailure;
  }
}

}  // namespace relay
