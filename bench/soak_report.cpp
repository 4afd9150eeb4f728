#include "soak_report.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <pqxx/pqxx>

#include "number_text.h"
#include "outbox/pqxx_compat.h"

namespace bench {
namespace {

using nlohmann::json;

std::optional<double> known(double v) { return v < 0 ? std::nullopt : std::optional<double>(v); }

std::string mib(long long bytes) { return fmt(static_cast<double>(bytes) / 1048576.0, 2); }

std::string cpu(double us) { return us < 0 ? "n/a" : fmt(us, 1); }

std::string show(const Percentiles& p) { return fmt(p.p50, 1) + "/" + fmt(p.p99, 1) + "/" + fmt(p.p999, 1); }

// Counts and sizes whole, other figures to 6 significant digits.
std::string csv_field(const std::optional<double>& v) {
  if (!v) return "";
  char buf[64];
  if (std::floor(*v) == *v && std::fabs(*v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", *v);
  else std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

json json_of(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::floor(*v) == *v && std::fabs(*v) < 1e15) return static_cast<long long>(*v);
  return *v;
}

}  // namespace

TableState read_table_state(pqxx::connection& admin, const std::string& schema) {
  TableState t;
  pqxx::nontransaction tx(admin);
  const std::string table = "\"" + schema + "\".outbox";
  t.heap_bytes = outbox::pgx::exec1(tx, "SELECT pg_relation_size('" + table + "')")[0].as<long long>();
  for (const auto& r : tx.exec("SELECT c.relname, pg_relation_size(i.indexrelid) FROM pg_index i "
                               "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = '" +
                               table + "'::regclass ORDER BY c.relname"))
    t.index_bytes.emplace_back(r[0].as<std::string>(), r[1].as<long long>());
  const auto s = outbox::pgx::exec1(
      tx,
      "SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, coalesce(last_autovacuum::text, '') "
      "FROM pg_stat_user_tables WHERE relid = '" +
          table + "'::regclass");
  t.live_tuples = s[0].as<long long>();
  t.dead_tuples = s[1].as<long long>();
  t.autovacuum_count = s[2].as<long long>();
  t.autoanalyze_count = s[3].as<long long>();
  t.last_autovacuum = s[4].as<std::string>();
  // The relay's own predicate (the partial index's): cheap however many rows the table keeps.
  t.pending_rows = outbox::pgx::exec1(tx, "SELECT count(*) FROM " + table +
                                              " WHERE published_at IS NULL AND parked_at IS NULL")[0]
                       .as<long>();
  return t;
}

WalState read_wal_state(pqxx::connection& admin) {
  WalState w;
  pqxx::nontransaction tx(admin);
  const int version = outbox::pgx::exec1(tx, "SHOW server_version_num")[0].as<int>();
  if (version < 140000) return w;
  // PostgreSQL 18 moved the flush counts and times to pg_stat_io: there they stay 0.
  const std::string sync = version < 180000 ? "wal_sync, wal_sync_time" : "0, 0";
  const std::string checkpoints = version < 170000
                                      ? "(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
                                      : "(SELECT num_timed + num_requested FROM pg_stat_checkpointer)";
  const auto r = outbox::pgx::exec1(tx,
                                    "SELECT wal_bytes, wal_fpi, " + sync + ", " + checkpoints + " FROM pg_stat_wal");
  w.known = true;
  w.bytes = r[0].as<double>();
  w.fpi = r[1].as<double>();
  w.syncs = r[2].as<double>();
  w.sync_ms = r[3].as<double>();
  w.checkpoints = r[4].as<double>();
  return w;
}

std::vector<Figure> figures(const SoakSample& s) {
  std::vector<Figure> f;
  auto add = [&](std::string name, std::optional<double> v, bool mean = false) {
    f.push_back({std::move(name), v, mean});
  };
  add("received", static_cast<double>(s.received));
  add("received_total", static_cast<double>(s.received_total));
  add("committed_total", static_cast<double>(s.committed_total));
  add("confirmed_total", static_cast<double>(s.confirmed_total));
  const std::pair<const char*, double Percentiles::*> levels[] = {
      {"p50", &Percentiles::p50}, {"p99", &Percentiles::p99}, {"p999", &Percentiles::p999}};
  for (const auto& [name, field] : levels)
    add(std::string("confirm_") + name + "_ms",
        s.confirm_ms && s.confirm_ms->count > 0 ? std::optional<double>((*s.confirm_ms).*field) : std::nullopt);
  for (const auto& [name, field] : levels)
    add(std::string("receipt_") + name + "_ms",
        s.receipt_ms.count > 0 ? std::optional<double>(s.receipt_ms.*field) : std::nullopt);
  add("relay_cpu_us_per_msg", known(s.relay_cpu_us));
  add("relay_pg_cpu_us_per_msg", known(s.relay_pg_cpu_us));
  add("pg_server_cpu_us_per_msg", known(s.pg_server_cpu_us));
  add("broker_cpu_us_per_msg", known(s.broker_cpu_us));
  add("machine_cores", known(s.machine_cores));
  add("relay_rss_mib", known(s.relay_rss_mib));
  add("disk_flush_p50_us",
      s.disk_flush_us && s.disk_flush_us->count > 0 ? std::optional(s.disk_flush_us->p50) : std::nullopt);
  add("disk_flush_p99_us",
      s.disk_flush_us && s.disk_flush_us->count > 0 ? std::optional(s.disk_flush_us->p99) : std::nullopt);
  add("wal_kib_per_msg", known(s.wal_kib_per_msg));
  add("wal_fpi_per_msg", known(s.wal_fpi_per_msg));
  add("wal_syncs_per_s", known(s.wal_syncs_per_s));
  add("wal_sync_us", known(s.wal_sync_us));
  add("checkpoints", known(s.checkpoints), true);
  add("heap_bytes", static_cast<double>(s.table.heap_bytes));
  for (const auto& [name, bytes] : s.table.index_bytes) add("index_bytes:" + name, static_cast<double>(bytes));
  add("live_tuples", static_cast<double>(s.table.live_tuples));
  add("dead_tuples", static_cast<double>(s.table.dead_tuples));
  add("autovacuums", static_cast<double>(s.autovacuums), true);
  add("autovacuum_count", static_cast<double>(s.table.autovacuum_count));
  add("autoanalyze_count", static_cast<double>(s.table.autoanalyze_count));
  add("pending_rows", static_cast<double>(s.table.pending_rows));
  add("queue_depth", static_cast<double>(s.queue_depth));
  return f;
}

std::string show(const std::string& mode, const SoakSample& s, int samples) {
  long long index_total = 0;
  for (const auto& [name, bytes] : s.table.index_bytes) index_total += bytes;
  const double seconds = s.end_s - s.start_s;
  std::string line = "soak " + mode + " " + std::to_string(s.index) + "/" + std::to_string(samples) + " at " +
                     fmt(s.end_s) + " s: " + std::to_string(s.received) + " msgs (" +
                     fmt(seconds > 0 ? static_cast<double>(s.received) / seconds : 0) +
                     "/s); p50/p99/p999 ms: confirm " +
                     (s.confirm_ms && s.confirm_ms->count > 0 ? show(*s.confirm_ms) : "n/a") + ", receipt " +
                     (s.receipt_ms.count > 0 ? show(s.receipt_ms) : "n/a") + "; CPU us/msg relay " +
                     cpu(s.relay_cpu_us) + ", its PG sessions " + cpu(s.relay_pg_cpu_us) + ", PG server " +
                     cpu(s.pg_server_cpu_us) + ", broker " + cpu(s.broker_cpu_us) + "; heap " +
                     mib(s.table.heap_bytes) + " MiB, indexes " + mib(index_total) + " MiB; dead tuples " +
                     std::to_string(s.table.dead_tuples) + ", autovacuums " + std::to_string(s.autovacuums) +
                     " (total " + std::to_string(s.table.autovacuum_count) + "); pending " +
                     std::to_string(s.table.pending_rows) + ", queue " + std::to_string(s.queue_depth) +
                     "; relay RSS " + (s.relay_rss_mib < 0 ? "n/a" : fmt(s.relay_rss_mib, 1)) + " MiB";
  if (s.wal_kib_per_msg >= 0)
    line += "; WAL " + fmt(s.wal_kib_per_msg, 2) + " KiB/msg, " + fmt(s.wal_syncs_per_s) + " flushes/s" +
            (s.wal_sync_us >= 0 ? " of " + fmt(s.wal_sync_us) + " us" : std::string()) + ", checkpoints " +
            fmt(s.checkpoints);
  if (s.disk_flush_us && s.disk_flush_us->count > 0)
    line += "; disk flush p50/p99 " + fmt(s.disk_flush_us->p50) + "/" + fmt(s.disk_flush_us->p99) + " us";
  return line + "\n";
}

json to_json(const SoakSample& s) {
  json j{{"index", s.index}, {"start_s", s.start_s}, {"end_s", s.end_s}, {"last_autovacuum", s.table.last_autovacuum}};
  for (const auto& f : figures(s)) j[f.name] = json_of(f.value);
  return j;
}

SoakCsv::SoakCsv(const std::string& path) : path_(path), out_(path) {
  if (!out_) throw BenchError("--soak-csv: cannot write '" + path + "'");
}

void SoakCsv::write(const std::string& mode, const SoakSample& s) {
  const auto f = figures(s);
  if (columns_ == 0) {
    out_ << "mode,sample,start_s,end_s";
    for (const auto& x : f) out_ << "," << x.name;
    out_ << ",last_autovacuum\n";
    columns_ = f.size();
  }
  if (f.size() != columns_)  // another set of indexes: the header would lie
    throw BenchError("soak CSV: " + std::to_string(f.size()) + " figures in a row of " + mode + ", " +
                     std::to_string(columns_) + " in the header");
  out_ << mode << "," << s.index << "," << fmt(s.start_s, 3) << "," << fmt(s.end_s, 3);
  for (const auto& x : f) out_ << "," << csv_field(x.value);
  out_ << "," << s.table.last_autovacuum << "\n";
  out_.flush();
  if (!out_) throw BenchError("soak CSV: cannot write '" + path_ + "'");
}

json compare_windows(const std::string& mode, const std::vector<SoakSample>& samples, double total_s) {
  const bool long_run = total_s >= 1800;
  const double width = long_run ? 600 : total_s / 3;
  constexpr double kSlack = 0.5;  // the last interval ends a little after the schedule
  std::vector<const SoakSample*> first, last;
  for (const auto& s : samples) {
    if (s.end_s <= width + kSlack) first.push_back(&s);
    if (s.start_s >= total_s - width - kSlack) last.push_back(&s);
  }
  // Intervals longer than a window: the first and the last interval stand for them.
  if (first.empty() && !samples.empty()) first.push_back(&samples.front());
  if (last.empty() && !samples.empty()) last.push_back(&samples.back());
  const std::string which = long_run ? "the last 10 minutes against the first 10"
                                     : "the last third against the first third";
  std::cout << "soak " << mode << ": " << which << " (" << first.size() << " and " << last.size()
            << " samples: " << fmt(first.empty() ? 0 : first.front()->start_s) << "-"
            << fmt(first.empty() ? 0 : first.back()->end_s) << " s against "
            << fmt(last.empty() ? 0 : last.front()->start_s) << "-" << fmt(last.empty() ? 0 : last.back()->end_s)
            << " s); each figure the median of its window's samples (autovacuums per interval: the mean)\n";
  char head[160];
  std::snprintf(head, sizeof head, "  %-34s %14s %14s %10s\n", "figure", "first", "last", "last/first");
  std::cout << head;
  json ratios = json::object();
  if (samples.empty()) return json{{"window", which}, {"ratios", ratios}};
  const auto names = figures(samples.front());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& name = names[i].name;
    if (name.find("_total") != std::string::npos || name.find("_count") != std::string::npos) continue;  // cumulative
    auto window = [&](const std::vector<const SoakSample*>& w) -> std::optional<double> {
      std::vector<double> v;
      for (const auto* s : w) {
        const auto f = figures(*s);
        if (i < f.size() && f[i].name == name && f[i].value) v.push_back(*f[i].value);
      }
      if (v.empty()) return std::nullopt;
      if (names[i].mean) {
        double sum = 0;
        for (double x : v) sum += x;
        return sum / static_cast<double>(v.size());
      }
      return median(v);
    };
    const auto a = window(first), b = window(last);
    std::optional<double> ratio;
    if (a && b && *a > 0) ratio = *b / *a;
    char line[200];
    std::snprintf(line, sizeof line, "  %-34s %14s %14s %10s\n", name.c_str(), a ? csv_field(a).c_str() : "n/a",
                  b ? csv_field(b).c_str() : "n/a", ratio ? fmt(*ratio, 2).c_str() : "-");
    std::cout << line;
    ratios[name] = json{{"first", json_of(a)}, {"last", json_of(b)}, {"ratio", json_of(ratio)}};
  }
  std::cout << std::flush;
  return json{{"window", which},
              {"first_samples", first.size()},
              {"last_samples", last.size()},
              {"first_s", json::array({first.front()->start_s, first.back()->end_s})},
              {"last_s", json::array({last.front()->start_s, last.back()->end_s})},
              {"ratios", ratios}};
}

}  // namespace bench
