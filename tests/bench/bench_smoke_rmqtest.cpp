// outbox-bench --smoke against the local servers: it runs every phase, writes the
// JSON summary with its figures, and leaves nothing behind, even when killed. Its
// speed is not checked.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

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

// Whether the broker knows a queue (passive declare on a throwaway connection).
bool queue_exists(const std::string& queue) {
  return testenv::AmqpTestClient(testenv::shared_amqp_endpoint()).queue_counts(queue).has_value();
}

}  // namespace

TEST_CASE("outbox-bench --smoke measures every phase, writes the JSON summary and cleans up") {
  const std::string json_path = testenv::write_temp_file("", ".json");
  auto run = run_bench({"--smoke", "--json", json_path, "--latency-per-transaction", "3"});
  if (run.exit_code != 0) MESSAGE(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("ratio drain 1 relay / broker ceiling") != std::string::npos);

  std::ifstream in(json_path);
  auto report = nlohmann::json::parse(in);
  ::unlink(json_path.c_str());
  for (const char* key : {"broker_ceiling_msgs_per_s", "pg_claim_ceiling_rows_per_s", "relay_drain_msgs_per_s",
                          "relay_drain_2proc_msgs_per_s", "latency_p50_ms", "latency_p99_ms", "relay_peak_rss_mib",
                          "drain_to_ceiling_ratio"}) {
    INFO(key);
    REQUIRE(report.contains(key));
    CHECK(report[key].get<double>() > 0);
  }
  REQUIRE(report.contains("idle_queries_per_s"));
  CHECK(report["idle_queries_per_s"].get<double>() >= 0);
  CHECK(report["latency"][0]["to_receipt_ms"]["count"].get<long>() > 0);
  CHECK(report["latency"][0]["messages_per_transaction"].get<int>() == 3);
  // The step's tail by second, and where the machine's CPU went meanwhile: every part
  // measured (all are local here), and together no more than the whole.
  const auto& by_second = report["latency"][0]["p99_by_second_ms"];
  REQUIRE(!by_second.empty());
  for (const auto& p99 : by_second) CHECK(p99.get<double>() > 0);
  CHECK(run.output.find("p99 by second of commit (ms):") != std::string::npos);
  // The same rate through the bench's floor pipeline: every message published and
  // received, and the relay's percentiles as ratios to the floor's.
  const auto& floor = report["latency"][0]["floor"];
  REQUIRE(floor.is_object());
  CHECK(floor["to_confirm_ms"]["count"].get<long>() > 0);
  CHECK(floor["to_receipt_ms"]["count"] == floor["to_confirm_ms"]["count"]);
  for (const char* p : {"p50", "p99", "p999"}) {
    INFO(p);
    CHECK(floor["relay_to_floor"][p].get<double>() > 0);
  }
  CHECK(report["latency_p99_to_floor_ratio"].get<double>() > 0);
  CHECK(run.output.find("relay / floor, commit->confirm: p50 ") != std::string::npos);
  const auto& cpu = report["latency"][0]["cpu_cores"];
  double parts = 0;
  for (const char* part : {"producers_pg", "relay_pg", "broker", "relay", "bench"}) {
    INFO(part);
    CHECK(cpu[part].get<double>() > 0);
    parts += cpu[part].get<double>();
  }
  CHECK(parts <= cpu["machine"].get<double>() + 0.2);  // clock-tick rounding of each part
  // The per-stage breakdown, from the latency relay's /metrics: every row of the rate
  // has its five stages, and the relay's CPU went into each stage.
  CHECK(run.output.find("stages (relay histograms; p99 at bucket resolution): queued") != std::string::npos);
  CHECK(run.output.find("relay loop CPU us/msg: claim") != std::string::npos);
  const auto& breakdown = report["latency"][0]["breakdown"];
  const auto rows = report["latency"][0]["to_confirm_ms"]["count"].get<double>();
  CHECK(breakdown["published"].get<double>() >= rows);
  for (const char* stage : {"queued", "claim", "publish", "confirm", "settle"}) {
    INFO(stage);
    CHECK(breakdown["stages_ms"][stage]["count"].get<double>() == breakdown["published"].get<double>());
    CHECK(breakdown["stages_ms"][stage]["p99_ms"].get<double>() >= 0);
  }
  for (const char* stage : {"claim", "decode", "publish", "settle", "mark"}) {
    INFO(stage);
    CHECK(breakdown["relay_cpu_us_per_msg"][stage].get<double>() > 0);
  }
  CHECK(breakdown["per_batch_ms"]["mark_and_commit"]["count"].get<double>() >= 1);
  CHECK(breakdown["per_batch_ms"]["claim"]["count"].get<double>() >= 1);
  // PostgreSQL's CPU per row by statement in the PG ceiling (its backend is local here).
  CHECK(run.output.find("PostgreSQL CPU us/row in the PG ceiling: mark mode claim") != std::string::npos);
  for (const char* mode : {"mark", "delete"}) {
    INFO(mode);
    const auto& cpu = report["pg_ceiling_cpu_us_per_row"][mode];
    REQUIRE(cpu.is_object());
    CHECK(cpu["claim"].get<double>() > 0);
    CHECK(cpu[mode].get<double>() > 0);
    CHECK(cpu["commit"].get<double>() > 0);
  }
  CHECK(report["enqueue"]["8conn_batch100_msgs_per_s"].get<double>() > 0);
  // With ordering keys (migration 0016's numbering): new keys, shared ones, one for all.
  for (const char* key : {"1conn_single_new_key_each_msgs_per_s", "1conn_single_1000_keys_msgs_per_s",
                          "8conn_single_1000_keys_msgs_per_s", "8conn_single_one_key_msgs_per_s"}) {
    INFO(key);
    CHECK(report["enqueue"][key].get<double>() > 0);
  }
  // The scale phase: 1 and 2 relays in each ordering mode, each drain complete.
  const auto& runs = report["scale"]["runs"];
  REQUIRE(runs.size() == 4);
  for (const auto& r : runs) {
    INFO(r.dump());
    CHECK(r["drain_msgs_per_s"].get<double>() > 0);
  }
  CHECK(runs[0]["ordering"] == "unordered");
  CHECK(runs[3]["ordering"] == "per_key");
  CHECK(runs[3]["relays"] == 2);
  // The wire phase: a ceiling per message shape, and drains with the default, lean
  // and delete-at-ack settings, each complete (measure_drain throws otherwise).
  REQUIRE(report["wire"]["ceilings"].size() == 8);
  for (const auto& c : report["wire"]["ceilings"]) CHECK(c["msgs_per_s"].get<double>() > 0);
  REQUIRE(report["wire"]["drains"].size() == 3);
  for (const auto& d : report["wire"]["drains"]) {
    INFO(d.dump());
    CHECK(d["ratio_to_ceiling"].get<double>() > 0);
  }
  // Fan-out: one queue, then three bound to the exchange; every drain complete.
  REQUIRE(report["fanout"].size() == 2);
  CHECK(report["fanout"][1]["queues"] == 3);
  for (const auto& f : report["fanout"]) CHECK(f["ratio_2_relays"].get<double>() > 0);
  // Scheduled messages: none lost or early (the phase fails the run otherwise), a
  // lateness and its floor measured.
  REQUIRE(report["scheduled"].size() == 1);
  CHECK(report["scheduled"][0]["rate"] == 200);
  CHECK(report["scheduled"][0]["lateness_p99_ms"].get<double>() >= 0);
  CHECK(report["scheduled"][0]["unscheduled_latency_p99_ms"].get<double>() > 0);
  CHECK(report["scheduled"][0]["rounds"][0]["lateness"]["count"].get<int>() >= 350);

  // Its own schema, exchange and queue are gone.
  const auto schema = report["schema"].get<std::string>();
  CHECK(schema.rfind("bench_", 0) == 0);
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema + "'") == "0");
  CHECK_FALSE(queue_exists(report["queue"].get<std::string>()));
}

TEST_CASE("outbox-bench refuses a bad option with exit code 2, naming it") {
  auto run = run_bench({"--backlog", "lots"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--backlog: expected an integer, got 'lots'") != std::string::npos);
  run = run_bench({"--rates", "1000,0"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--rates: must be between 1 and 1000000, got 0") != std::string::npos);
  run = run_bench({"--relay-setting", "tls.verify=false"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("expected [postgres.|amqp.]KEY=VALUE, got 'tls.verify=false'") != std::string::npos);
  run = run_bench({"--relay-setting", "ordering=per_key"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("'ordering=per_key': the scale phase sets ordering itself") != std::string::npos);
}

namespace {

// "Cpus_allowed_list" of every thread of `pid`, joined ("0|0|0"), or "" when it is gone.
std::string thread_cpus(pid_t pid) {
  std::string all;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task_dir.c_str());
  if (!d) return all;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(task_dir + "/" + e->d_name + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) all += (all.empty() ? "" : "|") + line.substr(line.find('\t') + 1);
  }
  ::closedir(d);
  return all;
}

pid_t pid_in_file(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// The local servers' pids ({broker, postmaster}; 0 when unknown) from deploy/local/servers.sh's folder.
std::pair<pid_t, pid_t> local_server_pids() {
  const char* dir = std::getenv("OUTBOX_LOCAL_DIR");
  const std::string local = dir && *dir ? dir : "/tmp/outbox-relay-local";
  return {pid_in_file(local + "/rabbitmq/rabbitmq.pid"), pid_in_file(local + "/pg/postmaster.pid")};
}

}  // namespace

TEST_CASE("outbox-bench --broker-cpus runs the broker on its own CPU for the run and gives every CPU back at exit") {
  const auto [broker, postmaster] = local_server_pids();
  REQUIRE(broker > 0);
  REQUIRE(postmaster > 0);
  if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    auto run = run_bench({"--smoke", "--phases", "rounds", "--broker-cpus", "0"});
    CHECK(run.exit_code != 0);
    CHECK(run.output.find("--broker-cpus: 0 leaves no CPU for PostgreSQL and the relays") != std::string::npos);
    return;
  }
  const std::string broker_before = thread_cpus(broker), postmaster_before = thread_cpus(postmaster);
  // What the broker's threads and the postmaster ran on while the bench ran.
  std::atomic<bool> done{false};
  std::set<std::string> broker_seen, postmaster_seen;
  std::thread watcher([&] {
    while (!done) {
      broker_seen.insert(thread_cpus(broker));
      postmaster_seen.insert(thread_cpus(postmaster));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto run = run_bench({"--smoke", "--phases", "rounds", "--broker-cpus", "0"});
  done = true;
  watcher.join();
  if (run.exit_code != 0) MESSAGE(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("broker on CPU 0; PostgreSQL, the bench and the relays on CPU 1") != std::string::npos);
  CHECK(run.output.find("ratio drain 1 relay / broker ceiling") != std::string::npos);
  // At some point of the run every broker thread was on CPU 0 only, and the
  // postmaster on CPU 1 only.
  CHECK(std::any_of(broker_seen.begin(), broker_seen.end(), [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0|") == std::string::npos && s.find("00") == std::string::npos;
  }));
  CHECK(postmaster_seen.count("1") == 1);
  // And as they were afterwards.
  CHECK(thread_cpus(broker) == broker_before);
  CHECK(thread_cpus(postmaster) == postmaster_before);

  run = run_bench({"--smoke", "--phases", "rounds", "--broker-cpus", "4096"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--broker-cpus: must be between 0 and 1023, got 4096") != std::string::npos);
}

extern char** environ;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// outbox-bench started in the background as a terminal's foreground job would be (a
// process group of its own, which its relays and janitor join), its output to a file.
struct BackgroundBench {
  pid_t pid = -1;
  std::string output_path;
};

BackgroundBench start_bench(const std::vector<std::string>& args) {
  BackgroundBench b;
  b.output_path = testenv::write_temp_file("", ".out");
  std::vector<std::string> all = {OUTBOX_BENCH_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, b.output_path.c_str(), O_WRONLY | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = posix_spawn(&b.pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  REQUIRE(rc == 0);
  return b;
}

// Each field of /proc/PID/stat after the command name: [0] state, [1] parent pid.
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto paren = line.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos) return fields;
  std::istringstream rest(line.substr(paren + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// Running and not a zombie.
bool alive(pid_t pid) {
  const auto f = stat_fields(pid);
  return !f.empty() && f[0] != "Z";
}

// The first outbox-relay child of `parent`: {pid, its --config file}, or {0, ""}.
std::pair<pid_t, std::string> relay_child(pid_t parent) {
  DIR* d = ::opendir("/proc");
  std::pair<pid_t, std::string> found{0, ""};
  while (const dirent* e = d ? ::readdir(d) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0 || found.first) continue;
    const auto f = stat_fields(pid);
    if (f.size() < 2 || f[1] != std::to_string(parent)) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> args;
    for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--config") found = {pid, args[i + 1]};
  }
  if (d) ::closedir(d);
  return found;
}

}  // namespace

TEST_CASE("an outbox-bench run killed by SIGKILL or Ctrl-C leaves no schema, queue, relay, file or pinned CPU") {
  const auto [broker, postmaster] = local_server_pids();
  REQUIRE(broker > 0);
  REQUIRE(postmaster > 0);
  const bool pin = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  for (int sig : {SIGKILL, SIGINT}) {
    CAPTURE(sig);
    const std::string broker_before = thread_cpus(broker), postmaster_before = thread_cpus(postmaster);
    const std::string csv = testenv::write_temp_file("", ".csv");
    std::vector<std::string> args = {"--smoke", "--phases", "soak", "--soak-csv", csv};
    if (pin) args.insert(args.end(), {"--broker-cpus", "0"});
    const auto bench = start_bench(args);
    // Running: its schema made, a soak relay started and, with two CPUs, PostgreSQL pinned.
    const std::string like = "bench\\_" + std::to_string(bench.pid) + "\\_%";
    std::string schema;
    std::pair<pid_t, std::string> relay;
    const bool running = testenv::eventually(std::chrono::seconds(60), [&] {
      schema = testenv::sql_value("SELECT coalesce(min(nspname::text), '') FROM pg_namespace WHERE nspname LIKE '" +
                                  like + "'");
      relay = relay_child(bench.pid);
      return !schema.empty() && relay.first > 0 && (!pin || thread_cpus(postmaster) == "1");
    });
    if (!running) MESSAGE(read_file(bench.output_path));
    REQUIRE(running);
    REQUIRE(testenv::eventually(std::chrono::seconds(10), [&] { return queue_exists(schema + "_q"); }));
    REQUIRE(::access(relay.second.c_str(), F_OK) == 0);

    ::kill(sig == SIGINT ? -bench.pid : bench.pid, sig);
    int status = 0;
    ::waitpid(bench.pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(testenv::eventually(std::chrono::seconds(60), [&] {
      return testenv::sql_value("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema + "'") == "0" &&
             !queue_exists(schema + "_q") && !alive(relay.first) && ::access(relay.second.c_str(), F_OK) != 0;
    }));
    if (pin)
      CHECK(testenv::eventually(std::chrono::seconds(10), [&] {
        return thread_cpus(broker) == broker_before && thread_cpus(postmaster) == postmaster_before;
      }));
    // The janitor's last line comes after every undo: only then is its report whole
    // (the schema is gone from the catalog a moment before its line is written).
    std::string output;
    CHECK(testenv::eventually(std::chrono::seconds(30), [&] {
      output = read_file(bench.output_path);
      return output.find("outbox-bench: cleanup after the run: done: ") != std::string::npos;
    }));
    INFO(output);
    CHECK(output.find("outbox-bench: cleanup after the run: done: ") != std::string::npos);
    CHECK(output.find(" 0 failed\n") != std::string::npos);
    CHECK(output.find("outbox-bench: cleanup after the run: dropped schema " + schema) != std::string::npos);
    CHECK(output.find("outbox-bench: cleanup after the run: deleted queue " + schema + "_q") != std::string::npos);
    // SIGKILL left the relay running for the janitor; Ctrl-C reached the relay too.
    if (sig == SIGKILL)
      CHECK(output.find("cleanup after the run: killed relay " + std::to_string(relay.first)) != std::string::npos);
    for (const auto& path : {bench.output_path, csv}) ::unlink(path.c_str());
  }
}

TEST_CASE("outbox-bench --latency-relays runs that many relays in the latency phase and shows each one's CPU") {
  const std::string json_path = testenv::write_temp_file("", ".json");
  auto run = run_bench({"--smoke", "--phases", "latency", "--latency-relays", "3", "--json", json_path});
  if (run.exit_code != 0) MESSAGE(run.output);
  REQUIRE(run.exit_code == 0);
  std::ifstream in(json_path);
  auto report = nlohmann::json::parse(in);
  ::unlink(json_path.c_str());
  REQUIRE(!report["latency"].empty());
  CHECK(report["latency"][0]["to_confirm_ms"]["count"].get<long>() > 0);
  const auto& cpu = report["latency"][0]["cpu_cores"];
  REQUIRE(cpu["per_relay"].size() == 3);
  double sum = 0;
  for (const auto& c : cpu["per_relay"]) {
    CHECK(c.get<double>() >= 0);
    sum += c.get<double>();
  }
  CHECK(cpu["relay"].get<double>() == doctest::Approx(sum));
  CHECK(run.output.find("+ relays ") != std::string::npos);

  run = run_bench({"--latency-relays", "17"});
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--latency-relays: must be between 1 and 16, got 17") != std::string::npos);
}
