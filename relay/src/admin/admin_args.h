#pragma once
// Argument parsing and shared plumbing of the commands (run, migrate, check and the
// admin commands status, replay, cleanup, dead).

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <pqxx/result>
#include <pqxx/transaction_base>
#include <string>
#include <vector>

#include "admin/commands.h"
#include "config/config.h"

namespace relay {

// One flag an admin command accepts.
struct FlagSpec {
  std::string name;  // "--older-than"
  bool takes_value = false;
  bool many = false;  // takes every following argument up to the next --flag
};

// Parsed flags: name -> values (a boolean flag maps to an empty list).
class AdminArgs {
 public:
  // Throws UsageError naming the unknown flag or the missing value. "--config" is
  // always accepted and required unless --help was given.
  AdminArgs(const std::string& command, const Args& args, const std::vector<FlagSpec>& specs);

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  const std::vector<std::string>& all(const std::string& flag) const;
  std::optional<std::string> value(const std::string& flag) const;
  // A whole-number flag in [min, max], or `fallback` when absent; UsageError when
  // malformed or out of range.
  long long integer(const std::string& flag, long long fallback, long long min, long long max) const;
  bool help() const { return has("--help"); }
  bool json() const { return has("--json"); }
  const std::string& config_path() const { return config_; }

 private:
  std::string command_;
  std::string config_;
  std::map<std::string, std::vector<std::string>> values_;
};

// Loads the configuration for a command; prints the error and returns nullopt when
// the file is bad (the caller exits 2).
std::optional<RelayConfig> load_config_or_report(const std::string& path);

// The rows named by --id: outbox ids (digits) and message ids (canonical UUIDs).
struct IdSelection {
  std::vector<std::int64_t> ids;
  std::vector<std::string> message_ids;
};

// Sorts --id values into outbox ids and message ids; UsageError naming the first
// value that is neither. Pure.
IdSelection parse_id_flags(const std::vector<std::string>& given);

// The state of one row an --id names, for check_ids' caller to judge.
struct IdRow {
  bool parked = false;
  bool published = false;
  std::string message_type;
};

// For --id (replay, dead requeue): every given id must name a row of `table` (the
// quoted outbox table) that `problem` accepts (nullopt), so that an id the command
// would skip stops it before anything changes. Returns one line per id that does
// not: "<id> not found", or "<id> <problem>" ("42 is not parked"); outbox ids first,
// then message ids, each in the order given.
std::vector<std::string> check_ids(pqxx::transaction_base& tx, const std::string& table, const IdSelection& ids,
                                   const std::function<std::optional<std::string>(const IdRow&)>& problem);

// A point in time given on the command line (--since, --until): an RFC 3339 time
// (2024-05-01T10:00:00Z; without an offset, UTC) or an age before now (90m, 12h, 7d;
// at most outbox::kMaxAge). Passed to SQL as ($N::timestamptz, $M::bigint seconds),
// the unused one NULL.
struct TimeBound {
  std::optional<std::string> time;
  std::optional<long long> age_s;
  bool given() const { return time || age_s; }
};

// The bound `flag` names, or an empty one when it is absent. Throws UsageError naming
// the flag and the value when it is neither form.
TimeBound parse_time_bound(const AdminArgs& args, const std::string& flag);

// Why an admin command failed, for its one line on stderr: a schema or table or
// function that does not exist (SQLSTATE 3F000, 42P01, 42883: the schema was never
// migrated, or not to this version) says "run outbox-relay migrate first" and
// PostgreSQL's first line; anything else, the error on one line.
std::string admin_failure_text(const std::exception& e, const std::string& schema);

// The server's clock now, as RFC 3339 UTC with microseconds: the default upper bound
// (--until) of a bulk selection, printed so the confirming run selects the same rows.
std::string server_now_utc(pqxx::transaction_base& tx);

// "12.3 s", "4 min 5 s", "2 h 3 min": ages and ETAs for people.
std::string human_seconds(double seconds);

// Why a bulk selection (replay --since, dead requeue --type/--all) may not change
// rows yet, or nullopt when it may: it can match far more than meant (every payment),
// so it changes rows only with --expect N equal to the `count` it matches; with
// `needs_expect` false (--id: every id checked) only a given --expect is held to it.
// `rows` names them ("published", "parked") and `command` the way to go on
// ("replay them"). Pure.
// `until` is the upper bound the selection used: the command to go on repeats it, so
// rows that come to match later (published or parked since) do not move the count.
std::optional<std::string> unconfirmed_selection(const AdminArgs& args, std::int64_t count, bool needs_expect,
                                                 const std::string& rows, const std::string& command,
                                                 const std::string& until);

// "by type: A 12, B 3" from rows with columns named message_type and count, the
// types cut to one line.
std::string by_type_text(const pqxx::result& rows);

}  // namespace relay
