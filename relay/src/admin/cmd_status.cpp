// outbox-relay status: the backlog at a glance, overall and by message type.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <tuple>

#include "admin/admin_args.h"
#include "config/doc_paths.h"
#include "config/preflight.h"
#include "outbox/one_line.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

constexpr const char* kStatusHelp =
    "usage: outbox-relay status --config FILE [--json]\n"
    "\n"
    "Prints the outbox backlog: rows pending (not yet published), parked (failed\n"
    "relay.max_attempts times; see 'dead list'), the age of the oldest pending row\n"
    "(the relay's lag), and rows published in the last minute, overall and by\n"
    "message type. Reads the whole outbox table once; changes nothing. The table\n"
    "lists the 50 types with the most pending rows (then parked), and how many more\n"
    "there are; the totals count every type. Rows still to be published that break\n"
    "the table's current row rules (written before a migration added a rule; they are\n"
    "left as they are) are counted by rule.\n"
    "\n"
    "  --json   one JSON object on stdout instead of the table, listing every type\n"
    "\n"
    "exit codes: 0 printed, 1 PostgreSQL failed, 2 bad usage or configuration\n";

struct TypeStatus {
  std::string type;
  std::int64_t pending = 0, parked = 0, published_last_minute = 0;
  double oldest_pending_age_s = 0;
  // Scheduled for later (migration 0018): not pending until due.
  std::int64_t scheduled = 0;
  double next_due_in_s = -1;  // -1: none scheduled
};

std::vector<TypeStatus> query_status(pqxx::connection& conn, const std::string& schema) {
  const auto table = outbox::quoted_identifier(schema, "postgres.schema") + ".outbox";
  pqxx::read_transaction tx(conn);
  // A schema migrated before 0018 has no deliver_at: nothing is scheduled there.
  const bool has_deliver_at =
      outbox::pgx::exec_params1(tx,
                                "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass "
                                "AND attname = 'deliver_at' AND NOT attisdropped)",
                                table)[0]
          .as<bool>();
  const std::string later = has_deliver_at ? "coalesce(deliver_at > now(), false)" : "false";
  const std::string due = OutboxStatements::pending_sql() + " AND NOT " + later;
  const std::string since = has_deliver_at ? "greatest(created_at, deliver_at)" : "created_at";
  auto rows = tx.exec("SELECT message_type, count(*) FILTER (WHERE " + due +
                      ") AS pending, "
                      "count(*) FILTER (WHERE parked_at IS NOT NULL) AS parked, "
                      "count(*) FILTER (WHERE published_at > now() - interval '1 minute') AS published_last_minute, "
                      "coalesce(extract(epoch from now() - min(" +
                      since + ") FILTER (WHERE " + due +
                      " AND isfinite(created_at))), 0)::float8 AS oldest_pending_age_s, "
                      "count(*) FILTER (WHERE " +
                      OutboxStatements::pending_sql() + " AND " + later + ") AS scheduled, " +
                      (has_deliver_at
                           ? "coalesce(extract(epoch from min(deliver_at) FILTER (WHERE " +
                                 OutboxStatements::pending_sql() + " AND " + later + ") - now()), -1)::float8"
                           : std::string("-1::float8")) +
                      " AS next_due_in_s FROM " + table + " GROUP BY message_type ORDER BY message_type");
  std::vector<TypeStatus> out;
  for (const auto& r : rows)
    out.push_back({r["message_type"].c_str(), r["pending"].as<std::int64_t>(), r["parked"].as<std::int64_t>(),
                   r["published_last_minute"].as<std::int64_t>(), r["oldest_pending_age_s"].as<double>(),
                   r["scheduled"].as<std::int64_t>(), r["next_due_in_s"].as<double>()});
  return out;
}

// Rows still to be published (pending or parked) that break a row rule of the table
// as it is now, by rule (migration 0015's outbox_row_fault: the rules the trigger
// applies to a new row). A rule added by a migration leaves the rows already there
// as they were; this is where an operator sees them. Empty for a schema migrated
// before 0015. One call of the function per row still to be published.
std::map<std::string, std::int64_t> query_rule_breaks(pqxx::connection& conn, const std::string& schema) {
  const auto s = outbox::quoted_identifier(schema, "postgres.schema");
  pqxx::read_transaction tx(conn);
  std::map<std::string, std::int64_t> out;
  if (outbox::pgx::exec1(tx, "SELECT to_regprocedure(" +
                                 tx.quote(s + ".outbox_row_fault(" + s + ".outbox, " + s + ".outbox)") + ") IS NULL")[0]
          .as<bool>())
    return out;
  for (const auto& r : tx.exec("SELECT f.rule, count(*) FROM " + s + ".outbox o CROSS JOIN LATERAL " + s +
                               ".outbox_row_fault(o) f WHERE o.published_at IS NULL AND f.rule IS NOT NULL "
                               "GROUP BY f.rule ORDER BY f.rule"))
    out[r[0].c_str()] = r[1].as<std::int64_t>();
  return out;
}

nlohmann::json to_json(const TypeStatus& s, bool with_type) {
  nlohmann::json j = {{"pending", s.pending},
                      {"parked", s.parked},
                      {"oldest_pending_age_s", s.oldest_pending_age_s},
                      {"published_last_minute", s.published_last_minute},
                      {"scheduled", s.scheduled}};
  if (s.next_due_in_s >= 0) j["next_scheduled_due_in_s"] = s.next_due_in_s;
  if (with_type) j["type"] = s.type;
  return j;
}

// The types the table lists: a terminal shows a screenful, and a table written by hand
// can hold 100 000 distinct types. The busiest come first, as an operator looks for them.
constexpr std::size_t kTypesShown = 50;

std::vector<TypeStatus> busiest(std::vector<TypeStatus> types) {
  const auto shown = std::min(types.size(), kTypesShown);
  std::partial_sort(types.begin(), types.begin() + shown, types.end(), [](const TypeStatus& a, const TypeStatus& b) {
    return std::tie(b.pending, b.parked, a.type) < std::tie(a.pending, a.parked, b.type);
  });
  types.resize(shown);
  return types;
}

void print_table(const std::string& schema, const TypeStatus& total, const std::vector<TypeStatus>& all_types,
                 const std::map<std::string, std::int64_t>& rule_breaks) {
  const auto types = busiest(all_types);
  std::printf("schema '%s'\n", schema.c_str());
  std::printf("  pending                %12lld\n", static_cast<long long>(total.pending));
  std::printf("  parked                 %12lld\n", static_cast<long long>(total.parked));
  std::printf("  oldest pending age     %12s\n", human_seconds(total.oldest_pending_age_s).c_str());
  std::printf("  published, last minute %12lld\n", static_cast<long long>(total.published_last_minute));
  if (total.scheduled > 0)
    std::printf("  scheduled for later    %12lld  (the next due in %s)\n", static_cast<long long>(total.scheduled),
                human_seconds(total.next_due_in_s).c_str());
  if (!rule_breaks.empty()) {
    // Rule names come from the migration, never from a row: nothing to escape.
    std::printf("\nrows still to publish that break a row rule (kept from before the rule; UPGRADING.md %s)\n",
                kDocsWhere);
    for (const auto& [rule, count] : rule_breaks)
      std::printf("  %-34s %10lld\n", rule.c_str(), static_cast<long long>(count));
  }
  if (types.empty()) return;
  std::printf("\n%-32s %10s %10s %14s %12s\n", "message type", "pending", "parked", "oldest pending", "published/1m");
  for (const auto& t : types)
    std::printf("%-32s %10lld %10lld %14s %12lld\n", outbox::one_line(t.type, 32).c_str(),
                static_cast<long long>(t.pending), static_cast<long long>(t.parked),
                t.pending ? human_seconds(t.oldest_pending_age_s).c_str() : "-",
                static_cast<long long>(t.published_last_minute));
  if (all_types.size() > types.size())
    std::printf("... and %zu more types (--json lists every type)\n", all_types.size() - types.size());
}

}  // namespace

int cmd_status(const Args& raw) {
  AdminArgs args("status", raw, {{"--json"}});
  if (args.help()) {
    std::cout << kStatusHelp;
    return kExitOk;
  }
  auto config = load_config_or_report(args.config_path());
  if (!config) return kExitUsage;
  std::vector<TypeStatus> types;
  std::map<std::string, std::int64_t> rule_breaks;
  try {
    auto conn_owner = connect_postgres(config->postgres);
    auto& conn = *conn_owner;
    types = query_status(conn, config->postgres.schema);
    rule_breaks = query_rule_breaks(conn, config->postgres.schema);
  } catch (const std::exception& e) {
    std::cerr << "status failed: " << admin_failure_text(e, config->postgres.schema) << "\n";
    return kExitFailure;
  }
  TypeStatus total;
  for (const auto& t : types) {
    total.pending += t.pending;
    total.parked += t.parked;
    total.published_last_minute += t.published_last_minute;
    if (t.pending) total.oldest_pending_age_s = std::max(total.oldest_pending_age_s, t.oldest_pending_age_s);
    total.scheduled += t.scheduled;
    if (t.next_due_in_s >= 0 && (total.next_due_in_s < 0 || t.next_due_in_s < total.next_due_in_s))
      total.next_due_in_s = t.next_due_in_s;
  }
  if (args.json()) {
    auto j = to_json(total, false);
    j["schema"] = config->postgres.schema;
    j["by_type"] = nlohmann::json::array();
    for (const auto& t : types) j["by_type"].push_back(to_json(t, true));
    j["rule_breaks"] = rule_breaks;  // {} when every row to publish passes the rules
    j["on_publish"] = config->relay.on_publish == OnPublish::kDelete ? "delete" : "mark";
    std::cout << j.dump(-1, ' ', true) << "\n";  // ASCII only: a type may hold C1 controls
  } else {
    print_table(config->postgres.schema, total, types, rule_breaks);
    if (config->relay.on_publish == OnPublish::kDelete)
      std::printf(
          "\nrelay.on_publish is delete: rows are deleted at ack, so the table holds no\n"
          "published history (\"published, last minute\" counts only rows marked before);\n"
          "the relay's /metrics (outbox_relay_published_total) counts what it publishes.\n");
  }
  return kExitOk;
}

}  // namespace relay
