// outbox-relay sequence-audit: per ordering key, the last sequence committed in the
// outbox against the last one a consumer applied (its sequence guard, migration
// 0017): "did billing see every order event?".

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>
#include <tuple>

#include "admin/admin_args.h"
#include "outbox/duration.h"
#include "outbox/one_line.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

constexpr const char* kAuditHelp =
    "usage: outbox-relay sequence-audit --config FILE --consumer NAME\n"
    "                                   [--consumer-dsn-file PATH] [--consumer-schema S]\n"
    "                                   [--key-prefix P] [--grace AGE] [--limit N] [--json]\n"
    "\n"
    "Compares, per ordering key, the last sequence committed in the outbox\n"
    "(outbox_key_sequences) with the last one consumer NAME applied through its\n"
    "sequence guard (inbox_key_sequences), and lists the keys it is behind on: by how\n"
    "much, since when a later event has waited for a missing one (held), and how long\n"
    "ago the key's last event was committed. A key whose last event is younger than\n"
    "--grace may still be in flight; one older is missing. Changes nothing.\n"
    "\n"
    "  --consumer NAME         the consumer name its runner and inbox use (required)\n"
    "  --consumer-dsn-file P   a file holding the consumer database's connection\n"
    "                          string (never a command-line argument: ps shows those);\n"
    "                          default: the configuration's postgres.dsn\n"
    "  --consumer-schema S     schema of the consumer's inbox (default: postgres.schema)\n"
    "  --key-prefix P          only keys starting with P (a consumer that receives every\n"
    "                          event of those keys only)\n"
    "  --grace AGE             how long a committed event may take to be applied\n"
    "                          (default 5m; 1s to 7d)\n"
    "  --limit N               keys listed (default 50, the longest behind first)\n"
    "  --json                  one JSON object on stdout\n"
    "\n"
    "The configuration's login needs SELECT on outbox_key_sequences (schema/roles.sql\n"
    "grants it to the relay role); the consumer's login reads its own consumer name's\n"
    "rows.\n"
    "\n"
    "exit codes: 0 every key in step (or behind within --grace), 1 PostgreSQL failed,\n"
    "2 bad usage or configuration, 3 some key is behind past --grace, or ahead of the\n"
    "outbox (its outbox counter was reset)\n";

constexpr int kExitBehind = 3;

struct ConsumerKey {
  std::int64_t applied = 0;
  std::optional<double> gap_s;  // since a later event waits, when one does
  std::int64_t held = 0;
};

struct KeyReport {
  std::string key;
  std::int64_t committed = 0, applied = 0, held = 0;
  double committed_ago_s = 0;
  std::optional<double> gap_s;
  bool late = false;  // behind past the grace, or ahead
};

std::chrono::seconds grace_flag(const AdminArgs& args) {
  auto given = args.value("--grace");
  if (!given) return std::chrono::minutes(5);
  std::chrono::seconds age{};
  try {
    age = outbox::parse_duration(*given);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--grace: ") + e.what());
  }
  if (age < std::chrono::seconds(1) || age > std::chrono::hours(24 * 7))
    throw UsageError("--grace must be between 1s and 7d, got '" + outbox::one_line(*given, 40) + "'");
  return age;
}

std::string read_dsn_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--consumer-dsn-file: cannot read '" + outbox::one_line(path, 200) + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string dsn = ss.str();
  while (!dsn.empty() && (dsn.back() == '\n' || dsn.back() == '\r' || dsn.back() == ' ')) dsn.pop_back();
  if (dsn.empty()) throw UsageError("--consumer-dsn-file: '" + outbox::one_line(path, 200) + "' is empty");
  return dsn;
}

std::map<std::string, ConsumerKey> consumer_keys(pqxx::connection& conn, const std::string& schema,
                                                 const std::string& consumer, const std::string& prefix) {
  const auto s = outbox::quoted_identifier(schema, "--consumer-schema");
  pqxx::read_transaction tx(conn);
  std::map<std::string, ConsumerKey> out;
  for (const auto& r : outbox::pgx::exec_params(
           tx,
           "SELECT s.ordering_key, s.last_seq, extract(epoch FROM now() - s.gap_since)::float8, "
           "(SELECT count(*) FROM " +
               s + ".inbox_held h WHERE h.consumer = s.consumer AND h.ordering_key = s.ordering_key) FROM " + s +
               ".inbox_key_sequences s WHERE s.consumer = $1 AND starts_with(s.ordering_key, $2)",
           consumer, prefix)) {
    ConsumerKey k{r[1].as<std::int64_t>(), std::nullopt, r[3].as<std::int64_t>()};
    if (!r[2].is_null()) k.gap_s = r[2].as<double>();
    out.emplace(r[0].c_str(), k);
  }
  return out;
}

// Walks the outbox's counters and keeps the keys the consumer is not in step on.
// Returns (keys in the outbox, keys in step).
std::pair<std::int64_t, std::int64_t> compare(pqxx::connection& conn, const std::string& schema,
                                              const std::string& prefix, std::map<std::string, ConsumerKey>& consumer,
                                              double grace_s, std::vector<KeyReport>& behind) {
  const auto s = outbox::quoted_identifier(schema, "postgres.schema");
  pqxx::read_transaction tx(conn);
  std::int64_t keys = 0, in_step = 0;
  for (const auto& r : outbox::pgx::exec_params(tx,
                                                "SELECT ordering_key, last_seq, extract(epoch FROM now() - "
                                                "updated_at)::float8 FROM " +
                                                    s + ".outbox_key_sequences WHERE starts_with(ordering_key, $1)",
                                                prefix)) {
    ++keys;
    KeyReport k{r[0].c_str(), r[1].as<std::int64_t>(), 0, 0, r[2].as<double>(), std::nullopt, false};
    if (auto it = consumer.find(k.key); it != consumer.end()) {
      k.applied = it->second.applied;
      k.held = it->second.held;
      k.gap_s = it->second.gap_s;
      consumer.erase(it);
    }
    if (k.applied == k.committed) {
      ++in_step;
      continue;
    }
    k.late = k.applied > k.committed || k.committed_ago_s > grace_s;
    behind.push_back(std::move(k));
  }
  // Keys the consumer applied that the outbox has no counter for: reset or deleted.
  for (auto& [key, c] : consumer)
    if (c.applied > 0) behind.push_back({key, 0, c.applied, c.held, 0, c.gap_s, true});
  return {keys, in_step};
}

void print_reports(const std::string& consumer, std::int64_t keys, std::int64_t in_step,
                   const std::vector<KeyReport>& shown, std::size_t total_behind, std::size_t late) {
  std::printf("consumer '%s': %lld key(s) in the outbox, %lld in step, %zu not (%zu past the grace)\n",
              consumer.c_str(), static_cast<long long>(keys), static_cast<long long>(in_step), total_behind, late);
  if (shown.empty()) return;
  std::printf("  %-32s %10s %10s %8s %6s  %s\n", "key", "committed", "applied", "behind", "held", "since");
  for (const auto& k : shown) {
    std::string since = k.committed == 0          ? "no outbox counter (reset?)"
                        : k.applied > k.committed ? "ahead of the outbox (counter reset?)"
                                                  : "last committed " + human_seconds(k.committed_ago_s) + " ago" +
                                                        (k.gap_s ? ", held " + human_seconds(*k.gap_s) : "");
    std::printf("  %-32s %10lld %10lld %8lld %6lld  %s%s\n", outbox::one_line(k.key, 32).c_str(),
                static_cast<long long>(k.committed), static_cast<long long>(k.applied),
                static_cast<long long>(k.committed - k.applied), static_cast<long long>(k.held), since.c_str(),
                k.late ? "" : " (in flight?)");
  }
  if (shown.size() < total_behind) std::printf("  ... and %zu more\n", total_behind - shown.size());
}

}  // namespace

int cmd_sequence_audit(const Args& raw) {
  AdminArgs args("sequence-audit", raw,
                 {{"--consumer", true},
                  {"--consumer-dsn-file", true},
                  {"--consumer-schema", true},
                  {"--key-prefix", true},
                  {"--grace", true},
                  {"--limit", true},
                  {"--json"}});
  if (args.help()) {
    std::cout << kAuditHelp;
    return kExitOk;
  }
  auto consumer = args.value("--consumer");
  if (!consumer) throw UsageError("sequence-audit needs --consumer NAME");
  // The rule of the inbox's consumer column (migration 0014): 1-200 of [A-Za-z0-9_.:-].
  if (consumer->empty() || consumer->size() > 200 || !std::all_of(consumer->begin(), consumer->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '-';
      }))
    throw UsageError("--consumer: '" + outbox::one_line(*consumer, 80) +
                     "' is not a consumer name (1-200 of [A-Za-z0-9_.:-])");
  const auto grace = grace_flag(args);
  const auto limit = static_cast<std::size_t>(args.integer("--limit", 50, 1, 1000000));
  const std::string prefix = args.value("--key-prefix").value_or("");
  std::optional<std::string> dsn;
  if (auto f = args.value("--consumer-dsn-file")) dsn = read_dsn_file(*f);
  auto config = load_config_or_report(args.config_path());
  if (!config) return kExitUsage;
  const std::string consumer_schema = args.value("--consumer-schema").value_or(config->postgres.schema);
  try {
    auto outbox_conn = connect_postgres(config->postgres);
    auto consumer_config = config->postgres;
    if (dsn) consumer_config.dsn = *dsn;
    auto consumer_conn = dsn ? connect_postgres(consumer_config) : nullptr;
    auto applied = consumer_keys(consumer_conn ? *consumer_conn : *outbox_conn, consumer_schema, *consumer, prefix);
    std::vector<KeyReport> behind;
    auto [keys, in_step] = compare(*outbox_conn, config->postgres.schema, prefix, applied,
                                   static_cast<double>(grace.count()), behind);
    std::sort(behind.begin(), behind.end(), [](const KeyReport& a, const KeyReport& b) {
      return std::tie(b.late, a.committed_ago_s, a.key) < std::tie(a.late, b.committed_ago_s, b.key);
    });
    const auto late = static_cast<std::size_t>(std::count_if(behind.begin(), behind.end(),
                                                             [](auto& k) { return k.late; }));
    const std::size_t total = behind.size();
    if (behind.size() > limit) behind.resize(limit);
    if (args.json()) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& k : behind)
        list.push_back({{"key", k.key},
                        {"committed", k.committed},
                        {"applied", k.applied},
                        {"behind", k.committed - k.applied},
                        {"held", k.held},
                        {"committed_ago_s", k.committed_ago_s},
                        {"held_for_s", k.gap_s ? nlohmann::json(*k.gap_s) : nlohmann::json()},
                        {"past_grace", k.late}});
      std::cout << nlohmann::json{{"consumer", *consumer}, {"keys", keys},       {"in_step", in_step},
                                  {"not_in_step", total},  {"past_grace", late}, {"grace_s", grace.count()},
                                  {"listed", list}}
                       .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                << "\n";
    } else {
      print_reports(*consumer, keys, in_step, behind, total, late);
    }
    return late > 0 ? kExitBehind : kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "sequence-audit failed: " << admin_failure_text(e, config->postgres.schema) << "\n";
    return kExitFailure;
  }
}

}  // namespace relay
