// outbox-bench --phases soak, short (3 modes of 30 s, a sample every 5 s, 300 msg/s)
// against the local servers: every mode runs, every sample row has every figure, the
// counts grow, the ratio table is printed, and nothing is left behind. The figures'
// values are not checked (issue 39: the hour-long runs are for that).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "amqp_test_client.h"
#include "relay_process.h"
#include "test_env.h"

namespace {

using Run = testenv::CommandResult;

// outbox-bench with `args`: its exit code and its stdout and stderr together.
Run run_bench(const std::vector<std::string>& args) {
  std::vector<std::string> all = {OUTBOX_BENCH_BIN};
  all.insert(all.end(), args.begin(), args.end());
  return testenv::run_command(all);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count_lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("outbox-bench --phases soak samples every figure in every mode and compares the last window to the first") {
  const std::string json_path = testenv::write_temp_file("", ".json");
  const std::string csv_path = json_path.substr(0, json_path.size() - 5) + ".soak.csv";  // beside --json
  auto run = run_bench({"--phases", "soak", "--soak-minutes", "0.5", "--soak-sample-seconds", "5", "--soak-rate", "300",
                        "--json", json_path});
  if (run.exit_code != 0) MESSAGE(run.output);
  REQUIRE(run.exit_code == 0);
  std::ifstream in(json_path);
  auto report = nlohmann::json::parse(in);
  ::unlink(json_path.c_str());
  const auto csv = read_file(csv_path);
  ::unlink(csv_path.c_str());

  // The other phases did not run: soak alone was asked for.
  CHECK_FALSE(report.contains("rounds"));
  CHECK_FALSE(report.contains("latency"));
  const auto& soak = report["soak"];
  REQUIRE(soak.is_object());
  CHECK(soak["csv"] == csv_path);
  const char* local_dir = std::getenv("OUTBOX_LOCAL_DIR");  // the test servers' folder (servers.sh env)
  REQUIRE(local_dir != nullptr);
  CHECK(soak["disk_probe_dir"] == std::string(local_dir));
  const bool wal_timing = testenv::sql_value("SHOW track_wal_io_timing") == "on";
  const auto& modes = soak["modes"];
  REQUIRE(modes.size() == 3);
  CHECK(modes[0]["mode"] == "mark");
  CHECK(modes[1]["mode"] == "delete");
  CHECK(modes[2]["mode"] == "ordered");
  std::size_t rows = 0;
  for (const auto& m : modes) {
    const std::string mode = m["mode"];
    INFO(mode);
    // Every committed message reached the consumer (the phase throws otherwise; the
    // JSON says so too).
    CHECK(m["committed"].get<long>() > 0);
    CHECK(m["received"].get<long>() == m["committed"].get<long>());
    const auto& samples = m["samples"];
    REQUIRE(samples.size() == 6);  // 30 s every 5 s
    rows += samples.size();
    long committed = 0, received = 0;
    for (const auto& s : samples) {
      INFO(s.dump());
      // The counts of published (received) messages grow sample after sample.
      CHECK(s["committed_total"].get<long>() > committed);
      CHECK(s["received_total"].get<long>() > received);
      CHECK(s["received"].get<long>() > 0);
      committed = s["committed_total"].get<long>();
      received = s["received_total"].get<long>();
      for (const char* p : {"receipt_p50_ms", "receipt_p99_ms", "receipt_p999_ms"}) CHECK(s[p].get<double>() > 0);
      // The ack time is the row's published_at: delete mode leaves no row to read it from.
      for (const char* p : {"confirm_p50_ms", "confirm_p99_ms", "confirm_p999_ms"}) {
        if (mode == "delete") CHECK(s[p].is_null());
        else CHECK(s[p].get<double>() > 0);
      }
      for (const char* c :
           {"relay_cpu_us_per_msg", "relay_pg_cpu_us_per_msg", "pg_server_cpu_us_per_msg", "broker_cpu_us_per_msg"})
        CHECK(s[c].get<double>() >= 0);
      CHECK(s["relay_rss_mib"].get<double>() > 0);
      // Delete mode's heap may be truncated to nothing by a vacuum when every row is gone.
      if (mode == "delete") CHECK(s["heap_bytes"].get<double>() >= 0);
      else CHECK(s["heap_bytes"].get<double>() > 0);
      int indexes = 0;
      for (const auto& [key, value] : s.items())
        if (key.rfind("index_bytes:", 0) == 0) {
          ++indexes;
          CHECK(value.get<double>() > 0);  // every btree has at least its metapage
        }
      CHECK(indexes >= 3);  // the primary key, message_id's unique index, the pending index at least
      CHECK(s.contains("index_bytes:outbox_pending_idx"));
      for (const char* c :
           {"dead_tuples", "live_tuples", "autovacuums", "autovacuum_count", "pending_rows", "queue_depth"})
        CHECK(s[c].get<double>() >= 0);
      CHECK(s["last_autovacuum"].is_string());
      // The disk under the servers, timed beside the run ($OUTBOX_LOCAL_DIR: the test
      // servers' folder), and the server's WAL in the interval.
      CHECK(s["disk_flush_p50_us"].get<double>() > 0);
      CHECK(s["disk_flush_p99_us"].get<double>() >= s["disk_flush_p50_us"].get<double>());
      CHECK(s["wal_kib_per_msg"].get<double>() > 0);
      CHECK(s["wal_fpi_per_msg"].get<double>() >= 0);
      CHECK(s["wal_syncs_per_s"].get<double>() > 0);
      CHECK(s["checkpoints"].get<double>() >= 0);
      // A flush time only where the server measures it.
      if (wal_timing) CHECK(s["wal_sync_us"].get<double>() > 0);
      else CHECK(s["wal_sync_us"].is_null());
    }
    // The comparison of the windows: thirds for a run this short, each figure's ratio.
    const auto& cmp = m["comparison"];
    CHECK(cmp["window"] == "the last third against the first third");
    CHECK(cmp["first_samples"].get<int>() >= 1);
    CHECK(cmp["last_samples"].get<int>() >= 1);
    for (const char* f : {"receipt_p99_ms", "relay_cpu_us_per_msg", "pg_server_cpu_us_per_msg",
                          "index_bytes:outbox_pkey", "disk_flush_p99_us", "wal_kib_per_msg"})
      CHECK(cmp["ratios"][f]["ratio"].get<double>() > 0);
    CHECK(run.output.find("soak " + mode + ": the last third against the first third") != std::string::npos);
    CHECK(run.output.find("soak " + mode + " 6/6 at ") != std::string::npos);
  }
  CHECK(run.output.find("last/first") != std::string::npos);
  // The CSV: a header naming every figure, then one row per sample.
  CHECK(csv.rfind("mode,sample,start_s,end_s,received,", 0) == 0);
  for (const char* column :
       {"confirm_p999_ms", "receipt_p99_ms", "relay_cpu_us_per_msg", "pg_server_cpu_us_per_msg", "heap_bytes",
        "index_bytes:outbox_pkey", "dead_tuples", "autovacuum_count", "pending_rows", "queue_depth",
        "disk_flush_p99_us", "wal_kib_per_msg", "wal_sync_us", "checkpoints", "last_autovacuum"})
    CHECK(csv.substr(0, csv.find('\n')).find(column) != std::string::npos);
  CHECK(count_lines(csv) == rows + 1);
  CHECK(csv.find("\nordered,6,") != std::string::npos);

  // Its own schema, exchange and queue are gone.
  const auto schema = report["schema"].get<std::string>();
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema + "'") == "0");
  CHECK_FALSE(testenv::AmqpTestClient(testenv::shared_amqp_endpoint())
                  .queue_counts(report["queue"].get<std::string>())
                  .has_value());
}

TEST_CASE("outbox-bench refuses a bad soak option with exit code 2, naming it") {
  auto run = run_bench({"--phases", "soak", "--soak-modes", "mark,fast"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--soak-modes: unknown mode 'fast' (mark, delete, ordered)") != std::string::npos);
  run = run_bench({"--phases", "soak", "--relay-setting", "on_publish=delete"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("'on_publish=delete': the soak phase sets ordering and on_publish itself") !=
        std::string::npos);
  run = run_bench({"--phases", "soak", "--soak-minutes", "0.1", "--soak-sample-seconds", "30"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--soak-sample-seconds: 30") != std::string::npos);
  run = run_bench({"--soak-minutes", "an hour"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--soak-minutes: expected a number of minutes, got 'an hour'") != std::string::npos);
  run = run_bench({"--phases", "soak", "--soak-disk-dir", "/nonexistent/outbox-bench"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--soak-disk-dir: '/nonexistent/outbox-bench' is not a directory") != std::string::npos);
}
