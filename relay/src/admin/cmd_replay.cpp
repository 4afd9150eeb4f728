// outbox-relay replay: publish already-published rows again, with the same message id.

#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "admin/admin_args.h"
#include "config/preflight.h"
#include "outbox/errors.h"
#include "outbox/one_line.h"
#include "outbox/pg_array.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

constexpr const char* kReplayHelp =
    "usage: outbox-relay replay --config FILE --id ID... [--type T] [--json]\n"
    "       outbox-relay replay --config FILE --since TIME [--until TIME] [--type T]\n"
    "                           [--max N] (--dry-run | --expect N) [--json]\n"
    "\n"
    "Makes published rows pending again, so the running relay publishes them once\n"
    "more with the SAME message id (consumers that deduplicate on it - an inbox -\n"
    "skip messages they already processed; use it for consumers that lost them).\n"
    "Replayed messages arrive after newer ones of the same key. Parked rows are not\n"
    "replayed: use 'dead requeue'. All selected rows change in one transaction.\n"
    "\n"
    "  --id ID...     message ids (UUID) or outbox ids (x-outbox-id); every one must\n"
    "                 exist and be published, or nothing changes (exit 2)\n"
    "  --since TIME   rows published at or after TIME: an RFC 3339 time\n"
    "                 (2024-05-01T10:00:00Z; without an offset, UTC) or an age\n"
    "                 (90m, 12h, 7d; at most 3650d).\n"
    "                 Changes rows only with --expect N; without it, prints what\n"
    "                 matches and changes nothing (exit 2)\n"
    "  --until TIME   rows published at or before TIME (the same forms). Default:\n"
    "                 the moment the command runs, printed with the count; repeat\n"
    "                 it with --expect so rows published since do not move the count\n"
    "  --expect N     the number of rows the selection must match, as a dry run\n"
    "                 printed it; any other number changes nothing (exit 2)\n"
    "  --type T       only rows of message type T\n"
    "  --max N        refuse when more than N rows match (default 100000)\n"
    "  --dry-run      count what would be replayed, change nothing\n"
    "  --json         one JSON object on stdout\n"
    "\n"
    "exit codes: 0 replayed (or dry run), 1 PostgreSQL failed, 2 bad usage,\n"
    "configuration, an id that is unknown or not published, --since without\n"
    "--expect, or a count other than --expect\n";

// The rows to replay, as a WHERE clause over the outbox and its parameters.
struct Selection {
  std::vector<std::int64_t> ids;         // outbox ids given directly
  std::vector<std::string> message_ids;  // canonical UUIDs
  TimeBound since;
  TimeBound until;  // --until, or the server's clock when the count is taken
  std::optional<std::string> type;
};

Selection parse_selection(const AdminArgs& args) {
  Selection s;
  const bool by_id = args.has("--id"), by_time = args.has("--since");
  if (by_id == by_time) throw UsageError("replay needs exactly one of --id ID... or --since TIME");
  auto picked = parse_id_flags(args.all("--id"));
  s.ids = std::move(picked.ids);
  s.message_ids = std::move(picked.message_ids);
  s.since = parse_time_bound(args, "--since");
  s.until = parse_time_bound(args, "--until");
  if (by_id && s.until.given()) throw UsageError("--until selects by time, with --since; not with --id");
  s.type = args.value("--type");
  return s;
}

// Every parameter appears in the text (PostgreSQL must infer each one's type); an
// unused criterion is passed as NULL.
std::string where_clause() {
  return "published_at IS NOT NULL AND parked_at IS NULL "
         "AND (cardinality($1::bigint[]) + cardinality($2::uuid[]) = 0 "
         "     OR id = ANY($1::bigint[]) OR message_id = ANY($2::uuid[])) "
         "AND ($3::timestamptz IS NULL OR published_at >= $3::timestamptz) "
         "AND ($4::bigint IS NULL OR published_at >= now() - $4::bigint * interval '1 second') "
         "AND ($5::text IS NULL OR message_type = $5::text) "
         "AND ($6::timestamptz IS NULL OR published_at <= $6::timestamptz) "
         "AND ($7::bigint IS NULL OR published_at <= now() - $7::bigint * interval '1 second')";
}

pqxx::result exec_selection(pqxx::work& tx, const std::string& sql, const Selection& s) {
  return outbox::pgx::exec_params(tx, sql, outbox::pg::bigint_array(s.ids), outbox::pg::text_array(s.message_ids),
                                  s.since.time, s.since.age_s, s.type, s.until.time, s.until.age_s);
}

// What a selection matches, for the operator to check before anything changes: the
// count by message type (the ten largest) and the publication times.
std::string describe_matches(pqxx::work& tx, const std::string& table, const std::string& where, const Selection& s) {
  auto types = exec_selection(tx,
                              "SELECT message_type, count(*) AS count FROM " + table + " WHERE " + where +
                                  " GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
                              s);
  auto span = exec_selection(tx,
                             "SELECT min(published_at)::text AS first_published, "
                             "max(published_at)::text AS last_published FROM " +
                                 table + " WHERE " + where,
                             s);
  std::string out = by_type_text(types);
  if (!span[0]["first_published"].is_null())
    out += std::string("; published ") + span[0]["first_published"].c_str() + " to " +
           span[0]["last_published"].c_str();
  return out;
}

// For --id: every id must name a published, unparked row, of --type when given (a
// row of another type would otherwise be skipped while the rest are replayed).
std::optional<std::string> replay_problem(const IdRow& r, const std::optional<std::string>& type) {
  if (r.parked) return "is parked (use 'dead requeue')";
  if (!r.published) return "is not published yet (pending)";
  if (type && *type != r.message_type)
    return "is of type '" + outbox::one_line(r.message_type, 80) + "', not --type '" + outbox::one_line(*type, 80) +
           "'";
  return std::nullopt;
}

// Makes the selected rows pending again and commits; returns their message ids.
// Throws (nothing changed) when the selection no longer matches `count` rows.
std::vector<std::string> replay_rows(pqxx::work& tx, const std::string& table, const std::string& where,
                                     const Selection& selection, std::int64_t count) {
  // Pending again, due now, with a fresh attempt count; the message id stays.
  auto r = exec_selection(tx,
                          "UPDATE " + table +
                              " SET published_at = NULL, next_attempt_at = now(), "
                              "attempts = 0, last_error = NULL WHERE " +
                              where + " RETURNING message_id::text AS message_id",
                          selection);
  if (static_cast<std::int64_t>(r.size()) != count)
    throw std::runtime_error("the selection changed while replaying; nothing changed, try again");
  std::vector<std::string> ids;
  for (const auto& row : r) ids.emplace_back(row["message_id"].c_str());
  tx.commit();
  return ids;
}

void print_outcome(const AdminArgs& args, const Selection& selection, std::int64_t count,
                   const std::vector<std::string>& ids) {
  const bool dry_run = args.has("--dry-run");
  if (args.json()) {
    nlohmann::json j = {{"dry_run", dry_run}, {"matched", count}, {"replayed", dry_run ? 0 : count}};
    if (selection.since.given()) {
      j["since"] = *args.value("--since");
      j["until"] = args.value("--until").value_or(selection.until.time.value_or(""));
    } else {
      j["message_ids"] = ids;
    }
    std::cout << j.dump(-1, ' ', true) << "\n";
  } else if (dry_run) {
    std::cout << count << " published row(s) would be replayed (dry run, nothing changed)";
    if (selection.since.given() && !args.has("--until") && count > 0)
      std::cout << "; to replay them: --until " << *selection.until.time << " --expect " << count;
    std::cout << "\n";
  } else {
    std::cout << "replayed " << count << " row(s): pending again with their message ids; "
              << "the running relay publishes them\n";
  }
}

}  // namespace

int cmd_replay(const Args& raw) {
  AdminArgs args("replay", raw,
                 {{"--id", true, true},
                  {"--since", true},
                  {"--until", true},
                  {"--type", true},
                  {"--max", true},
                  {"--expect", true},
                  {"--dry-run"},
                  {"--json"}});
  if (args.help()) {
    std::cout << kReplayHelp;
    return kExitOk;
  }
  auto selection = parse_selection(args);
  const bool by_time = args.has("--since");
  const auto max = args.integer("--max", 100000, 1, 100000000);
  args.integer("--expect", 0, 0, 100000000);  // a bad --expect is bad usage, before connecting
  auto config = load_config_or_report(args.config_path());
  if (!config) return kExitUsage;
  if (config->relay.on_publish == OnPublish::kDelete)
    std::cerr << "replay: note: relay.on_publish is delete, so rows published in that mode were deleted at ack\n"
                 "and cannot be replayed from the table; only rows marked published before remain\n";
  const auto table = outbox::quoted_identifier(config->postgres.schema, "postgres.schema") + ".outbox";
  const auto where = where_clause();
  try {
    auto conn_owner = connect_postgres(config->postgres);
    auto& conn = *conn_owner;
    pqxx::work tx(conn);
    // A --since without an offset (2024-05-01T10:00) means UTC, as the help says,
    // whatever time zone the server or PGTZ gives the session; times shown are UTC too.
    tx.exec("SET LOCAL TimeZone = 'UTC'");
    // Without --until the selection ends now, and says so: the run that confirms the
    // count repeats this bound, so rows published in between do not change it.
    if (by_time && !selection.until.given()) selection.until.time = server_now_utc(tx);
    if (!selection.ids.empty() || !selection.message_ids.empty()) {
      auto problems = check_ids(tx, table, IdSelection{selection.ids, selection.message_ids},
                                [&](const IdRow& r) { return replay_problem(r, selection.type); });
      if (!problems.empty()) {
        for (const auto& p : problems) std::cerr << "replay: " << outbox::one_line(p) << "\n";
        std::cerr << "replay: nothing changed\n";
        return kExitUsage;
      }
    }
    const auto count = exec_selection(tx, "SELECT count(*) AS count FROM " + table + " WHERE " + where,
                                      selection)[0]["count"]
                           .as<std::int64_t>();
    if (count > max) {
      std::cerr << "replay: " << count << " rows match, more than --max " << max
                << "; narrow the selection or raise --max. Nothing changed\n";
      return kExitUsage;
    }
    if (by_time && count > 0) std::cerr << "replay: " << describe_matches(tx, table, where, selection) << "\n";
    if (!args.has("--dry-run"))
      if (auto why = unconfirmed_selection(args, count, by_time, "published", "replay them",
                                           selection.until.time.value_or(""))) {
        std::cerr << "replay: " << *why << "\n";
        return kExitUsage;
      }
    std::vector<std::string> ids;
    if (!args.has("--dry-run")) ids = replay_rows(tx, table, where, selection, count);
    print_outcome(args, selection, count, ids);
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "replay failed: " << admin_failure_text(e, config->postgres.schema) << "\n";
    return kExitFailure;
  }
}

}  // namespace relay
