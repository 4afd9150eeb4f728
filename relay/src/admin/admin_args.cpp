#include "admin/admin_args.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "config/rfc3339.h"
#include "outbox/duration.h"
#include "outbox/error_text.h"
#include "outbox/errors.h"
#include "outbox/message_id.h"
#include "outbox/one_line.h"
#include "outbox/pg_array.h"
#include "outbox/pqxx_compat.h"

namespace relay {
namespace {

// PostgreSQL refuses text that is not UTF-8 (a --type from a mangled terminal) with
// an error after connecting; the JSON library's encoder checks it the same way.
bool valid_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

Args expand_args(const Args& args) {
  Args out;
  for (const auto& a : args) {
    const auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos && eq > 2) {
      out.push_back(a.substr(0, eq));
      out.push_back(a.substr(eq + 1));
    } else {
      out.push_back(a == "-c" ? "--config" : a);
    }
  }
  return out;
}

AdminArgs::AdminArgs(const std::string& command, const Args& args, const std::vector<FlagSpec>& specs)
    : command_(command) {
  bool config_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--config") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file name");
      if (config_given) throw UsageError("--config given twice");  // as every other flag
      config_given = true;
      config_ = args[++i];
      continue;
    }
    if (a == "--help" || a == "-h") {
      values_["--help"];
      continue;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == a) spec = &s;
    if (!spec) throw UsageError("unknown argument '" + outbox::one_line(a, 80) + "' for " + command);
    auto& values = values_[a];
    if (!spec->takes_value) continue;
    if (!spec->many && !values.empty()) throw UsageError(a + " given twice");
    std::size_t before = values.size();
    while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      values.push_back(args[++i]);
      if (!spec->many) break;
    }
    if (values.size() == before) throw UsageError(a + " needs a value");
    for (std::size_t v = before; v < values.size(); ++v)
      if (!valid_utf8(values[v]))
        throw UsageError(a + " " + outbox::quoted_value(values[v], 60) + " is not valid UTF-8");
  }
  if (config_.empty() && !help()) throw UsageError(command + " needs --config FILE");
}

const std::vector<std::string>& AdminArgs::all(const std::string& flag) const {
  static const std::vector<std::string> none;
  auto it = values_.find(flag);
  return it == values_.end() ? none : it->second;
}

std::optional<std::string> AdminArgs::value(const std::string& flag) const {
  const auto& v = all(flag);
  if (v.empty()) return std::nullopt;
  return v.front();
}

long long AdminArgs::integer(const std::string& flag, long long fallback, long long min, long long max) const {
  auto v = value(flag);
  if (!v) return fallback;
  if (v->empty() || v->size() > 12 || v->find_first_not_of("0123456789") != std::string::npos || std::stoll(*v) < min ||
      std::stoll(*v) > max)
    throw UsageError(flag + " must be a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
                     ", got '" + outbox::one_line(*v, 40) + "'");
  return std::stoll(*v);
}

std::optional<RelayConfig> load_config_or_report(const std::string& path) {
  try {
    return load_config(path);
  } catch (const ConfigError& e) {
    std::cerr << "outbox-relay: invalid configuration: " << outbox::one_line(e.what()) << "\n";
    return std::nullopt;
  }
}

IdSelection parse_id_flags(const std::vector<std::string>& given) {
  IdSelection s;
  for (const auto& id : given) {
    // Up to 18 digits: an outbox id (bigint); anything else must be a UUID.
    if (!id.empty() && id.size() <= 18 && id.find_first_not_of("0123456789") == std::string::npos) {
      s.ids.push_back(std::stoll(id));
      continue;
    }
    try {
      s.message_ids.push_back(outbox::MessageId::parse(id, "--id").to_string());
    } catch (const outbox::ValidationError&) {
      throw UsageError("--id '" + outbox::one_line(id, 60) + "' is neither a message id (UUID) nor an outbox id");
    }
  }
  return s;
}

std::string human_seconds(double s) {
  if (!(s >= 0) || std::isinf(s)) return "unknown";
  char buf[64];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %d s", int(s) / 60, int(s) % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%d h %d min", int(s) / 3600, int(s) % 3600 / 60);
  else std::snprintf(buf, sizeof buf, "%d d %d h", int(s / 86400), int(std::fmod(s, 86400)) / 3600);
  return buf;
}

std::optional<std::string> unconfirmed_selection(const AdminArgs& args, std::int64_t count, bool needs_expect,
                                                 const std::string& rows, const std::string& command,
                                                 const std::string& until) {
  const auto expect = args.integer("--expect", 0, 0, 100000000);
  const std::string bound = until.empty() || args.has("--until") ? "" : "--until " + until + " ";
  if (args.has("--expect") && count != expect)
    return std::to_string(count) + " row(s) match, not --expect " + std::to_string(expect) +
           "; check the selection (a dry run shows it" +
           (bound.empty() ? std::string() : ", with the --until to repeat") + "). Nothing changed";
  if (needs_expect && !args.has("--expect") && count > 0)
    return std::to_string(count) + " " + rows + " row(s) match; nothing changed. To " + command + " run again with " +
           bound + "--expect " + std::to_string(count);
  return std::nullopt;
}

TimeBound parse_time_bound(const AdminArgs& args, const std::string& flag) {
  TimeBound b;
  auto given = args.value(flag);
  if (!given) return b;
  const std::string shown = flag + " '" + outbox::one_line(*given, 60) + "' ";
  // Starts like a date: a time, checked here so an impossible one exits 2, not 1.
  if (given->size() >= 5 && given->find('-') == 4) {
    if (auto problem = rfc3339_problem(*given)) throw UsageError(shown + *problem);
    b.time = *given;
    return b;
  }
  std::chrono::seconds age{};
  try {
    age = outbox::parse_duration(*given);
  } catch (const std::invalid_argument&) {
    throw UsageError(shown + "is neither an RFC 3339 time (2024-05-01T10:00:00Z) nor an age (12h, 7d)");
  }
  if (age > outbox::kMaxAge)
    throw UsageError(shown + "is longer than the longest age, " + outbox::format_duration(outbox::kMaxAge));
  b.age_s = age.count();
  return b;
}

std::string server_now_utc(pqxx::transaction_base& tx) {
  // clock_timestamp(), not now(): the transaction may have started a while ago.
  return tx
      .exec(
          "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', "
          "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")[0][0]
      .c_str();
}

std::string by_type_text(const pqxx::result& rows) {
  std::string out = "by type:";
  for (const auto& r : rows)
    out += " " + outbox::one_line(r["message_type"].c_str(), 80) + " " + r["count"].c_str() + ",";
  if (!rows.empty()) out.pop_back();
  return out;
}

std::vector<std::string> check_ids(pqxx::transaction_base& tx, const std::string& table, const IdSelection& ids,
                                   const std::function<std::optional<std::string>(const IdRow&)>& problem) {
  auto found =
      outbox::pgx::exec_params(tx,
                               "SELECT id, message_id::text AS message_id, published_at IS NOT NULL AS published, "
                               "parked_at IS NOT NULL AS parked, message_type FROM " +
                                   table + " WHERE id = ANY($1::bigint[]) OR message_id = ANY($2::uuid[])",
                               outbox::pg::bigint_array(ids.ids), outbox::pg::text_array(ids.message_ids));
  std::vector<std::string> problems;
  auto judge = [&](const std::string& given, auto match) {
    for (const auto& r : found) {
      if (!match(r)) continue;
      if (auto why = problem(IdRow{r["parked"].as<bool>(), r["published"].as<bool>(), r["message_type"].c_str()}))
        problems.push_back(given + " " + *why);
      return;
    }
    problems.push_back(given + " not found");
  };
  for (auto id : ids.ids)
    judge(std::to_string(id), [&](const pqxx::row& r) { return r["id"].as<std::int64_t>() == id; });
  for (const auto& m : ids.message_ids) judge(m, [&](const pqxx::row& r) { return m == r["message_id"].c_str(); });
  return problems;
}

std::string admin_failure_text(const std::exception& e, const std::string& schema) {
  const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
  const std::string state = sql ? sql->sqlstate() : "";
  if (state == "3F000" || state == "42P01" || state == "42883") {
    std::string first = e.what();
    first = first.substr(0, first.find('\n'));
    return "schema '" + schema + "' is not migrated to this version of outbox-relay: run outbox-relay migrate first (" +
           outbox::one_line(first) + ")";
  }
  return outbox::one_line(e.what());
}

}  // namespace relay
