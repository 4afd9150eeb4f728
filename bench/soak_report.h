#pragma once
// The soak phase's figures: one sample per interval, the table's state read from
// PostgreSQL, the CSV rows, and the ratio of the last window to the first.

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <utility>
#include <vector>

#include "measurements.h"

namespace bench {

// The outbox table's state (pg_relation_size, pg_stat_user_tables) and its pending rows.
struct TableState {
  long long heap_bytes = 0;
  std::vector<std::pair<std::string, long long>> index_bytes;  // by index name, sorted
  long long live_tuples = 0, dead_tuples = 0;
  long long autovacuum_count = 0, autoanalyze_count = 0;
  std::string last_autovacuum;  // "" when never
  long pending_rows = 0;        // due for the claim (not published, not parked)
};
TableState read_table_state(pqxx::connection& admin, const std::string& schema);

// The server's WAL and checkpoint counters (pg_stat_wal, PostgreSQL 14 and later;
// checkpoints from pg_stat_bgwriter, or pg_stat_checkpointer from 17). Cumulative:
// a sample's figures are differences of two readings. sync_ms stays 0 unless the
// server sets track_wal_io_timing; `known` is false on a server without pg_stat_wal.
struct WalState {
  bool known = false;
  double bytes = 0, fpi = 0, syncs = 0, sync_ms = 0, checkpoints = 0;
};
WalState read_wal_state(pqxx::connection& admin);

// One interval of a soak mode. CPU figures are microseconds per message received in
// the interval; -1 where unreadable (a process gone, no message received).
struct SoakSample {
  int index = 0;
  double start_s = 0, end_s = 0;  // since the producers started
  long committed_total = 0, received_total = 0, confirmed_total = 0;
  long received = 0;                      // in this interval
  std::optional<Percentiles> confirm_ms;  // commit -> published_at (not in delete mode: no row left)
  Percentiles receipt_ms;                 // commit -> the consumer's receipt
  double relay_cpu_us = -1, relay_pg_cpu_us = -1, pg_server_cpu_us = -1, broker_cpu_us = -1;
  double machine_cores = -1;  // the whole machine's busy CPUs (other work on a shared box)
  double relay_rss_mib = -1;
  // The disk under the servers: this interval's flushes of 4 KiB (DiskProbe), when probed.
  std::optional<Percentiles> disk_flush_us;
  // The server's WAL in this interval: per message received, flushes per second, the
  // mean flush time (-1 unless track_wal_io_timing is on) and checkpoints started.
  double wal_kib_per_msg = -1, wal_fpi_per_msg = -1, wal_syncs_per_s = -1, wal_sync_us = -1, checkpoints = -1;
  long long autovacuums = 0;  // autovacuum runs on the table in this interval
  TableState table;
  std::uint32_t queue_depth = 0;
};

// A figure of a sample by name, in the CSV's column order; nullopt where absent.
// `mean`: compared over windows by its mean (a count per interval, mostly 0), else by the median.
struct Figure {
  std::string name;
  std::optional<double> value;
  bool mean = false;
};
std::vector<Figure> figures(const SoakSample& s);

// One line for the console.
std::string show(const std::string& mode, const SoakSample& s, int samples);
nlohmann::json to_json(const SoakSample& s);

// The CSV of the whole phase, one row per sample, flushed at each (an hour-long run
// that fails keeps its rows). The header comes from the first row.
class SoakCsv {
 public:
  explicit SoakCsv(const std::string& path);
  void write(const std::string& mode, const SoakSample& s);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  std::size_t columns_ = 0;
};

// The last window of a mode against its first: 10 minutes each for runs of 30
// minutes or more, else the last third against the first third. Prints the table;
// returns {"window": ..., "ratios": {figure: {first, last, ratio}}}.
nlohmann::json compare_windows(const std::string& mode, const std::vector<SoakSample>& samples, double total_s);

}  // namespace bench
