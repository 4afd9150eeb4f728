// outbox-bench: the relay against the machine's own limits, measured in one run.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench_env.h"
#include "bench_options.h"
#include "cpu_isolation.h"
#include "floor_pipeline.h"
#include "janitor.h"
#include "measurements.h"
#include "number_text.h"
#include "outbox/pqxx_compat.h"
#include "process_cpu.h"
#include "relay_runner.h"
#include "scheduled_phase.h"
#include "soak_phase.h"
#include "stage_breakdown.h"
#include "wire_phase.h"

namespace bench {
namespace {

using nlohmann::json;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string first_line_with(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

json machine() {
  json m;
  auto model = first_line_with("/proc/cpuinfo", "model name");
  m["cpu_model"] = model.empty() ? "unknown" : model.substr(model.find(':') + 2);
  m["cpus"] = std::thread::hardware_concurrency();
  auto mem = first_line_with("/proc/meminfo", "MemTotal:");
  long kib = mem.empty() ? 0 : std::stol(mem.substr(9));
  m["memory_gib"] = kib / 1048576.0;
  utsname u{};
  if (uname(&u) == 0) m["kernel"] = std::string(u.sysname) + " " + u.release;
  m["load_average_at_start"] = load_average();
  return m;
}

json to_json(const Percentiles& p) {
  return json{{"p50", p.p50}, {"p99", p.p99}, {"p999", p.p999}, {"max", p.max}, {"count", p.count}};
}

std::string show(const Percentiles& p) {
  return "p50 " + fmt(p.p50, 2) + " p99 " + fmt(p.p99, 2) + " p999 " + fmt(p.p999, 2) + " ms";
}

// The commit -> confirm p99 of each second of a latency step, in order.
std::string show_by_second(const std::vector<double>& p99s) {
  std::string out = "  p99 by second of commit (ms):";
  int over = 0;
  for (double p : p99s) {
    out += " " + fmt(p, 1);
    over += p > 5.0 ? 1 : 0;
  }
  return out + " (" + std::to_string(over) + " of " + std::to_string(p99s.size()) + " seconds over 5 ms)\n";
}

json to_json(const StepCpu& c) {
  return json{{"machine", c.machine}, {"producers_pg", c.producers_pg}, {"relay_pg", c.relay_pg}, {"broker", c.broker},
              {"relay", c.relay},     {"per_relay", c.per_relay},       {"bench", c.bench}};
}

// " (0.11, 0.14)": each relay's share, when there are several.
std::string per_relay(const std::vector<double>& cores) {
  std::string out;
  for (double c : cores) out += (out.empty() ? " (" : ", ") + fmt(c, 2);
  return out.empty() ? out : out + ")";
}

// Cores of the machine's CPUs (there are `cpus`) each part used during a latency step.
std::string show(const StepCpu& c, unsigned cpus) {
  auto part = [](const char* name, double v) {
    return v < 0 ? std::string() : std::string(" ") + name + " " + fmt(v, 2);
  };
  return "  CPU in cores of " + std::to_string(cpus) + ":" + part("machine", c.machine) +
         part("= producers' sessions", c.producers_pg) + part("+ relay's sessions", c.relay_pg) +
         part("+ broker", c.broker) + part(c.per_relay.empty() ? "+ relay" : "+ relays", c.relay) +
         per_relay(c.per_relay) + part("+ bench clients", c.bench) +
         " + the rest (WAL writer, kernel threads, interrupts)\n";
}

// The PG ceiling's backend CPU per row by statement: the median of the rounds.
json to_json(const std::vector<PgStatementCpu>& rounds, const char* settle) {
  std::vector<double> claim, settled, commit;
  for (const auto& c : rounds) {
    if (!c.measured) return nullptr;
    claim.push_back(c.claim_us);
    settled.push_back(c.settle_us);
    commit.push_back(c.commit_us);
  }
  return json{{"claim", median(claim)},
              {settle, median(settled)},
              {"commit", median(commit)},
              {"total", median(claim) + median(settled) + median(commit)}};
}

std::string show(const PgStatementCpu& c, const char* settle) {
  if (!c.measured) return "not measured (the backend's /proc is not readable)";
  return "claim " + fmt(c.claim_us, 2) + " + " + settle + " " + fmt(c.settle_us, 2) + " + commit " +
         fmt(c.commit_us, 2) + " = " + fmt(c.claim_us + c.settle_us + c.commit_us, 2);
}

class Bench {
 public:
  Bench(const BenchOptions& o, RelaySpec spec) : o_(o), spec_(std::move(spec)) {}

  json run() {
    BenchEnv env(o_.queue_type == "quorum");
    ::setenv("OUTBOX_BENCH_RELAY_DSN", env.relay_dsn().c_str(), 1);
    report_["command"] = o_.command;
    report_["date"] = utc_now();
    report_["machine"] = machine();
    report_["message_bytes"] = o_.message_bytes;
    report_["queue_type"] = o_.queue_type;
    report_["backlog"] = o_.backlog;
    report_["batch_size"] = o_.batch_size;
    report_["relay_settings"] = o_.relay_settings;
    report_["schema"] = env.schema();  // dropped, like the exchange and queue, at the end
    report_["exchange"] = env.exchange();
    report_["queue"] = env.queue();
    std::cout << "outbox-bench " << report_["date"].get<std::string>() << ", " << report_["machine"]["cpus"]
              << " CPUs, load " << load_average() << "\n"
              << "  " << o_.command << "\n";
    std::optional<BrokerCpuIsolation> isolation;  // until the end of the run, whatever happens
    if (!o_.broker_cpus.empty()) {
      const auto broker = broker_pid();
      if (!broker)
        throw BenchError("--broker-cpus: the broker's pid is unknown (no $OUTBOX_LOCAL_DIR/rabbitmq/rabbitmq.pid)");
      const auto backend =
          outbox::pgx::exec1(pqxx::nontransaction(env.admin()), "SELECT pg_backend_pid()")[0].as<int>();
      isolation.emplace(o_.broker_cpus, *broker, BrokerCpuIsolation::postmaster_of(backend));
      report_["broker_cpus"] = isolation->description();
      std::cout << "  " << isolation->description() << "\n";
    }
    if (o_.runs("rounds")) rounds(env);
    if (o_.runs("enqueue")) enqueue(env);
    if (o_.runs("latency")) latency_and_idle(env);
    if (o_.runs("sweeps")) sweeps(env);
    if (o_.runs("scale")) scale(env);
    if (o_.runs("wire")) report_["wire"] = run_wire_phase(env, o_, spec_);
    if (o_.runs("fanout")) report_["fanout"] = run_fanout_phase(env, o_, spec_, 3);
    if (o_.runs("scheduled")) report_["scheduled"] = run_scheduled_phase(env, o_, spec_);
    if (o_.runs("soak")) {
      report_["soak"] = run_soak_phase(env, o_, spec_);
      for (const auto& m : report_["soak"]["modes"])
        peak_rss_ = std::max(peak_rss_, m["relay_peak_rss_mib"].get<double>());
    }
    summary();
    report_["machine"]["load_average_at_end"] = load_average();
    return report_;
  }

 private:
  void rounds(BenchEnv& env) {
    std::vector<double> ceiling, pg, pg_delete, drain1, drain2, ratio, ratio2, broker_ceiling_cpu, client_cpu,
        broker_drain_cpu, pg_cpu, steady1;
    std::vector<PgStatementCpu> pg_mark_cpu(static_cast<std::size_t>(o_.repeats)), pg_delete_cpu(pg_mark_cpu);
    for (int i = 1; i <= o_.repeats; ++i) {
      auto c = measure_broker_ceiling(env, o_.message_bytes, o_.backlog);
      ceiling.push_back(c.msgs_per_s);
      broker_ceiling_cpu.push_back(c.broker_cpu_us_per_msg);
      client_cpu.push_back(c.client_cpu_us_per_msg);
      auto& mark_cpu = pg_mark_cpu[static_cast<std::size_t>(i - 1)];
      auto& delete_cpu = pg_delete_cpu[static_cast<std::size_t>(i - 1)];
      pg.push_back(measure_pg_ceiling(env, o_.backlog, o_.batch_size, o_.message_bytes, PgSettle::kMark, &mark_cpu));
      pg_delete.push_back(measure_pg_ceiling(env, o_.backlog, o_.batch_size, o_.message_bytes, PgSettle::kDelete,
                                             &delete_cpu));
      auto d1 = measure_drain(env, spec_, DrainPlan{o_.backlog, 1, o_.message_bytes});
      auto d2 = measure_drain(env, spec_, DrainPlan{o_.backlog, 2, o_.message_bytes});
      drain1.push_back(d1.msgs_per_s);
      steady1.push_back(d1.steady_msgs_per_s);
      drain2.push_back(d2.msgs_per_s);
      ratio.push_back(d1.msgs_per_s / c.msgs_per_s);
      ratio2.push_back(d2.msgs_per_s / d1.msgs_per_s);
      cpu_us_.push_back(d1.cpu_us_per_msg);
      pg_cpu.push_back(d1.pg_cpu_us_per_msg);
      broker_drain_cpu.push_back(d1.broker_cpu_us_per_msg);
      peak_rss_ = std::max({peak_rss_, d1.peak_rss_mib, d2.peak_rss_mib});
      std::cout << "round " << i << "/" << o_.repeats << ": broker ceiling " << fmt(c.msgs_per_s)
                << " msg/s | PG claim ceiling " << fmt(pg.back()) << " rows/s | drain 1 relay " << fmt(d1.msgs_per_s)
                << " msg/s (" << fmt(ratio.back(), 2) << " x ceiling) | 2 relays " << fmt(d2.msgs_per_s)
                << " msg/s | PG claim+delete " << fmt(pg_delete.back()) << " rows/s\n"
                << "  CPU us/msg: ceiling: broker " << fmt(c.broker_cpu_us_per_msg, 1) << " + client "
                << fmt(c.client_cpu_us_per_msg, 1) << "; drain: broker " << fmt(d1.broker_cpu_us_per_msg, 1)
                << " + relay " << fmt(d1.cpu_us_per_msg, 1) << " + PostgreSQL " << fmt(d1.pg_cpu_us_per_msg, 1)
                << "\n  PostgreSQL CPU us/row in the PG ceiling: mark mode " << show(mark_cpu, "mark")
                << "; delete mode " << show(delete_cpu, "delete") << "\n"
                << std::flush;
    }
    report_["broker_ceiling_msgs_per_s"] = median(ceiling);
    report_["pg_claim_ceiling_rows_per_s"] = median(pg);
    report_["pg_claim_delete_ceiling_rows_per_s"] = median(pg_delete);
    report_["relay_drain_msgs_per_s"] = median(drain1);
    report_["relay_drain_2proc_msgs_per_s"] = median(drain2);
    report_["relay_drain_steady_msgs_per_s"] = median(steady1);
    report_["drain_to_ceiling_ratio"] = median(ratio);
    report_["drain_2proc_to_1proc_ratio"] = median(ratio2);
    report_["relay_cpu_us_per_msg"] = median(cpu_us_);
    report_["cpu_us_per_msg"] = json{{"ceiling_broker", median(broker_ceiling_cpu)},
                                     {"ceiling_client", median(client_cpu)},
                                     {"drain_broker", median(broker_drain_cpu)},
                                     {"drain_relay", median(cpu_us_)},
                                     {"drain_postgres", median(pg_cpu)}};
    report_["pg_ceiling_cpu_us_per_row"] = json{{"mark", to_json(pg_mark_cpu, "mark")},
                                                {"delete", to_json(pg_delete_cpu, "delete")}};
    report_["rounds"] = json{{"broker_ceiling_msgs_per_s", ceiling},
                             {"pg_claim_ceiling_rows_per_s", pg},
                             {"pg_claim_delete_ceiling_rows_per_s", pg_delete},
                             {"relay_drain_msgs_per_s", drain1},
                             {"relay_drain_2proc_msgs_per_s", drain2},
                             {"relay_drain_steady_msgs_per_s", steady1},
                             {"drain_to_ceiling_ratio", ratio},
                             {"drain_2proc_to_1proc_ratio", ratio2}};
  }

  void enqueue(BenchEnv& env) {
    json e;
    std::string line = "enqueue (producer SDK):";
    for (int conns : {1, 8})
      for (int per_tx : {1, 100}) {
        double rate = measure_enqueue_rate(env, conns, per_tx, o_.producer_seconds, o_.message_bytes);
        std::string key = std::to_string(conns) + "conn_" + (per_tx == 1 ? "single" : "batch100");
        e[key + "_msgs_per_s"] = rate;
        line += " " + key + " " + fmt(rate) + "/s";
      }
    // Single-message transactions with ordering keys: each row's number costs an
    // upsert of its key's counter (migration 0016); producers of one key queue.
    for (const auto& [conns, keys, name] : {std::tuple{1, EnqueueKeys::kNewEach, "1conn_single_new_key_each"},
                                            std::tuple{1, EnqueueKeys::kThousand, "1conn_single_1000_keys"},
                                            std::tuple{8, EnqueueKeys::kThousand, "8conn_single_1000_keys"},
                                            std::tuple{8, EnqueueKeys::kOneShared, "8conn_single_one_key"}}) {
      double rate = measure_enqueue_rate(env, conns, 1, o_.producer_seconds, o_.message_bytes, keys);
      e[std::string(name) + "_msgs_per_s"] = rate;
      line += std::string(" ") + name + " " + fmt(rate) + "/s";
    }
    // The same while a relay waits for notifications (the bench holds the waiting
    // relay's lock of migration 0004): every commit then sends a NOTIFY.
    {
      pqxx::connection holder(env.pg_dsn());
      outbox::pgx::exec_params(pqxx::nontransaction(holder), "SELECT pg_advisory_lock(1868724338, hashtext($1))",
                               env.schema());
      for (int conns : {1, 8}) {
        double rate = measure_enqueue_rate(env, conns, 1, o_.producer_seconds, o_.message_bytes);
        std::string key = std::to_string(conns) + "conn_single_relay_waiting";
        e[key + "_msgs_per_s"] = rate;
        line += " " + key + " " + fmt(rate) + "/s";
      }
    }
    report_["enqueue"] = e;
    std::cout << line << "\n" << std::flush;
  }

  void latency_and_idle(BenchEnv& env) {
    // Its /metrics, scraped around each rate: where the time and CPU went, per stage.
    const std::string metrics_at = "127.0.0.1:" + std::to_string(free_local_port());
    auto settings = spec_.settings;
    settings.push_back("http.listen=" + metrics_at);
    RelayRunner relay(spec_.binary, relay_yaml(env.schema(), spec_.batch_size, settings), false);
    std::vector<std::unique_ptr<RelayRunner>> more;  // --latency-relays: the same relay, no /metrics
    for (int i = 1; i < o_.latency_relays; ++i)
      more.push_back(std::make_unique<RelayRunner>(spec_.binary,
                                                   relay_yaml(env.schema(), spec_.batch_size, spec_.settings), false));
    std::vector<pid_t> pids{relay.pid()};
    for (const auto& r : more) pids.push_back(r->pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // connect
    // Warm-up, not counted: the relay's first seconds (connections, plans, the
    // broker's queue process) are not its steady state.
    measure_latency(env, o_.rates.front(), std::min(2.0, o_.latency_seconds / 4), o_.message_bytes,
                    o_.latency_per_transaction);
    json all = json::array();
    std::vector<LatencyResult> relay_results;
    // The summary keys quote the rate nearest 1000 messages/s (the target's).
    long headline = o_.rates.front();
    for (long rate : o_.rates)
      if (std::labs(rate - 1000) < std::labs(headline - 1000)) headline = rate;
    for (long rate : o_.rates) {
      const auto before = scrape_metrics_settled(metrics_at);
      auto r = measure_latency(env, rate, o_.latency_seconds, o_.message_bytes, o_.latency_per_transaction, pids);
      relay_results.push_back(r);
      const auto stages = stage_breakdown(before, scrape_metrics_settled(metrics_at));
      all.push_back(json{{"rate", r.rate},
                         {"achieved_rate", r.achieved_rate},
                         {"producers", r.producers},
                         {"messages_per_transaction", r.per_transaction},
                         {"to_confirm_ms", to_json(r.to_confirm_ms)},
                         {"to_receipt_ms", to_json(r.to_receipt_ms)},
                         {"p99_by_second_ms", r.p99_by_second_ms},
                         {"cpu_cores", to_json(r.cpu)},
                         {"breakdown", to_json(stages)}});
      std::cout << "latency at " << rate << " msg/s (achieved " << fmt(r.achieved_rate) << "; " << r.producers
                << " producers, " << r.per_transaction << " per transaction): commit->confirm " << show(r.to_confirm_ms)
                << "; commit->receipt " << show(r.to_receipt_ms) << "\n"
                << (r.achieved_rate < 0.95 * static_cast<double>(rate)
                        ? "  the producers fell behind the schedule (their commits wait for the WAL flush): these "
                          "figures are at the achieved rate\n"
                        : "")
                << show_by_second(r.p99_by_second_ms) << show(r.cpu, std::thread::hardware_concurrency())
                << (more.empty() ? "" : "  the first relay's stages and CPU (the others have no /metrics):\n")
                << show(stages) << std::flush;
      if (rate == headline) {
        report_["latency_p50_ms"] = r.to_confirm_ms.p50;
        report_["latency_p99_ms"] = r.to_confirm_ms.p99;
        report_["latency_p999_ms"] = r.to_confirm_ms.p999;
        report_["latency_rate_msgs_per_s"] = rate;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));  // settle into idle
    double idle = measure_idle_queries(env, o_.idle_seconds);
    report_["idle_queries_per_s"] = idle;
    std::cout << "idle relay: " << fmt(idle, 2) << " statements/s over " << fmt(o_.idle_seconds, 0) << " s\n";
    for (auto& r : more) {
      r->stop();
      auto u = r->wait_for(std::chrono::seconds(30));
      if (!u || u->exit_code != 0)
        throw BenchError("a latency relay did not stop cleanly; log tail:\n" + r->log_tail());
    }
    relay.sample_rss();  // its high-water mark, before it goes
    relay.stop();
    auto usage = relay.wait_for(std::chrono::seconds(30));
    if (!usage || usage->exit_code != 0)
      throw BenchError("the latency relay did not stop cleanly; log tail:\n" + relay.log_tail());
    peak_rss_ = std::max(peak_rss_, usage->peak_rss_mib);
    env.reset();
    if (o_.latency_floor) latency_floor(env, relay_results, all, headline);
    report_["latency"] = all;
  }

  // The same rates through FloorPipeline, the relay stopped: its latency, and the
  // relay's as ratios to it (same producers, same machine, minutes apart).
  void latency_floor(BenchEnv& env, const std::vector<LatencyResult>& relay, json& all, long headline) {
    FloorPipeline floor(env, spec_.batch_size);
    measure_latency(env, o_.rates.front(), std::min(2.0, o_.latency_seconds / 4), o_.message_bytes,
                    o_.latency_per_transaction);  // warm-up, as for the relay
    for (std::size_t i = 0; i < o_.rates.size(); ++i) {
      auto f = measure_latency(env, o_.rates[i], o_.latency_seconds, o_.message_bytes, o_.latency_per_transaction);
      const Percentiles& r = relay[i].to_confirm_ms;
      const auto ratio = [](double relay_ms, double floor_ms) { return floor_ms > 0 ? relay_ms / floor_ms : -1; };
      const json ratios{{"p50", ratio(r.p50, f.to_confirm_ms.p50)},
                        {"p99", ratio(r.p99, f.to_confirm_ms.p99)},
                        {"p999", ratio(r.p999, f.to_confirm_ms.p999)}};
      all[i]["floor"] = json{{"achieved_rate", f.achieved_rate},
                             {"to_confirm_ms", to_json(f.to_confirm_ms)},
                             {"to_receipt_ms", to_json(f.to_receipt_ms)},
                             {"cpu_cores", to_json(f.cpu)},
                             {"relay_to_floor", ratios}};
      std::cout << "latency floor at " << o_.rates[i] << " msg/s (achieved " << fmt(f.achieved_rate)
                << "; the bench's simplest correct pipeline): commit->confirm " << show(f.to_confirm_ms)
                << "; commit->receipt " << show(f.to_receipt_ms) << "\n  relay / floor, commit->confirm: p50 "
                << fmt(ratios["p50"].get<double>(), 2) << " p99 " << fmt(ratios["p99"].get<double>(), 2) << " p999 "
                << fmt(ratios["p999"].get<double>(), 2) << "\n"
                << show_by_second(f.p99_by_second_ms) << std::flush;
      if (o_.rates[i] == headline) report_["latency_p99_to_floor_ratio"] = ratios["p99"];
    }
    floor.stop();
    env.reset();
  }

  void sweeps(BenchEnv& env) {
    json s = json::object();
    for (long b : o_.sweep_batch_sizes) {
      RelaySpec spec = spec_;
      spec.batch_size = static_cast<int>(b);
      auto d = measure_drain(env, spec, DrainPlan{o_.backlog, 1, o_.message_bytes});
      peak_rss_ = std::max(peak_rss_, d.peak_rss_mib);
      s["batch_size"].push_back(json{{"batch_size", b},
                                     {"drain_msgs_per_s", d.msgs_per_s},
                                     {"cpu_us_per_msg", d.cpu_us_per_msg},
                                     {"peak_rss_mib", d.peak_rss_mib}});
      std::cout << "sweep batch_size " << b << ": drain " << fmt(d.msgs_per_s) << " msg/s, " << fmt(d.cpu_us_per_msg, 1)
                << " us CPU/msg, RSS " << fmt(d.peak_rss_mib, 1) << " MiB\n"
                << std::flush;
    }
    for (long bytes : o_.sweep_message_bytes) {
      // Large messages: a backlog worth about as many bytes as the default one.
      long rows = std::max(std::min(o_.backlog, 5000L),
                           std::min(o_.backlog, o_.backlog * o_.message_bytes / bytes * 4));
      double ceiling = measure_broker_ceiling(env, static_cast<int>(bytes), rows).msgs_per_s;
      auto d = measure_drain(env, spec_, DrainPlan{rows, 1, static_cast<int>(bytes)});
      peak_rss_ = std::max(peak_rss_, d.peak_rss_mib);
      s["message_bytes"].push_back(json{{"message_bytes", bytes},
                                        {"rows", rows},
                                        {"broker_ceiling_msgs_per_s", ceiling},
                                        {"drain_msgs_per_s", d.msgs_per_s},
                                        {"ratio", d.msgs_per_s / ceiling},
                                        {"steady_msgs_per_s", d.steady_msgs_per_s},
                                        {"steady_ratio", d.steady_msgs_per_s / ceiling},
                                        {"cpu_us_per_msg", d.cpu_us_per_msg},
                                        {"pg_cpu_us_per_msg", d.pg_cpu_us_per_msg},
                                        {"broker_cpu_us_per_msg", d.broker_cpu_us_per_msg},
                                        {"peak_rss_mib", d.peak_rss_mib}});
      std::cout << "sweep " << bytes << " B messages (" << rows << " rows): broker ceiling " << fmt(ceiling)
                << " msg/s, drain " << fmt(d.msgs_per_s) << " msg/s (" << fmt(d.msgs_per_s / ceiling, 2)
                << " x; steady " << fmt(d.steady_msgs_per_s) << " msg/s, " << fmt(d.steady_msgs_per_s / ceiling, 2)
                << " x), RSS " << fmt(d.peak_rss_mib, 1) << " MiB; CPU us/msg: relay " << fmt(d.cpu_us_per_msg, 1)
                << ", PostgreSQL " << fmt(d.pg_cpu_us_per_msg, 1) << ", broker " << fmt(d.broker_cpu_us_per_msg, 1)
                << "\n"
                << std::flush;
    }
    if (!o_.sweep_backlogs.empty() && o_.history_rows > 0) {
      env.fill(o_.history_rows, o_.message_bytes, /*published=*/true);
      env.keep_history();
      std::cout << "history: " << o_.history_rows << " published rows in the table\n" << std::flush;
    }
    for (long rows : o_.sweep_backlogs) {
      // The broker slows as its queue grows (a deep queue pages to disk), so each
      // backlog has its own ceiling: the ratio isolates what the relay adds.
      double ceiling = measure_broker_ceiling(env, o_.message_bytes, rows).msgs_per_s;
      double pg = measure_pg_ceiling(env, rows, o_.batch_size, o_.message_bytes);
      auto d = measure_drain(env, spec_, DrainPlan{rows, 1, o_.message_bytes});
      peak_rss_ = std::max(peak_rss_, d.peak_rss_mib);
      s["backlog"].push_back(json{{"rows", rows},
                                  {"history_rows", o_.history_rows},
                                  {"broker_ceiling_msgs_per_s", ceiling},
                                  {"pg_claim_ceiling_rows_per_s", pg},
                                  {"ratio", d.msgs_per_s / ceiling},
                                  {"drain_msgs_per_s", d.msgs_per_s},
                                  {"steady_msgs_per_s", d.steady_msgs_per_s},
                                  {"cpu_us_per_msg", d.cpu_us_per_msg},
                                  {"pg_cpu_us_per_msg", d.pg_cpu_us_per_msg},
                                  {"peak_rss_mib", d.peak_rss_mib}});
      std::cout << "sweep backlog " << rows << " rows (" << o_.history_rows
                << " published in the table): broker ceiling " << fmt(ceiling) << " msg/s, PG claim ceiling " << fmt(pg)
                << " rows/s, drain " << fmt(d.msgs_per_s) << " msg/s (" << fmt(d.msgs_per_s / ceiling, 2)
                << " x; steady " << fmt(d.steady_msgs_per_s) << "), CPU us/msg relay " << fmt(d.cpu_us_per_msg, 1)
                << " PostgreSQL " << fmt(d.pg_cpu_us_per_msg, 1) << ", RSS " << fmt(d.peak_rss_mib, 1) << " MiB\n"
                << std::flush;
    }
    report_["sweeps"] = s;
  }

  // 1, 2, 4... relays in both ordering modes over one keyed backlog: how the relay
  // scales out, and what per-key ordering costs. The relays run until nothing is
  // pending (per_key relays share lanes and cannot each exit when idle).
  void scale(BenchEnv& env) {
    json runs = json::array();
    for (const std::string mode : {"unordered", "per_key"}) {
      RelaySpec spec = spec_;
      spec.settings.push_back("ordering=" + mode);
      double one = 0;
      for (long n : o_.scale_relays) {
        DrainPlan plan{o_.backlog, static_cast<int>(n), o_.message_bytes, o_.scale_keys, /*exit_when_idle=*/false};
        auto d = measure_drain(env, spec, plan);
        peak_rss_ = std::max(peak_rss_, d.peak_rss_mib);
        if (one == 0) one = d.msgs_per_s;
        runs.push_back(json{{"ordering", mode},
                            {"relays", n},
                            {"drain_msgs_per_s", d.msgs_per_s},
                            {"steady_msgs_per_s", d.steady_msgs_per_s},
                            {"ratio_to_first", d.msgs_per_s / one},
                            {"cpu_us_per_msg", d.cpu_us_per_msg},
                            {"pg_cpu_us_per_msg", d.pg_cpu_us_per_msg},
                            {"peak_rss_mib", d.peak_rss_mib}});
        std::cout << "scale " << mode << ", " << n << " relay(s), " << o_.scale_keys << " keys: drain "
                  << fmt(d.msgs_per_s) << " msg/s (steady " << fmt(d.steady_msgs_per_s) << ", "
                  << fmt(d.msgs_per_s / one, 2) << " x " << o_.scale_relays.front() << " relay(s)), CPU us/msg relays "
                  << fmt(d.cpu_us_per_msg, 1) << " PostgreSQL " << fmt(d.pg_cpu_us_per_msg, 1) << "\n"
                  << std::flush;
      }
    }
    report_["scale"] = json{{"keys", o_.scale_keys}, {"backlog", o_.backlog}, {"runs", runs}};
  }

  void summary() {
    report_["relay_peak_rss_mib"] = peak_rss_;
    std::cout << "relay: peak RSS " << fmt(peak_rss_, 1) << " MiB";
    if (!cpu_us_.empty()) std::cout << ", CPU " << fmt(median(cpu_us_), 1) << " us/msg (drain, one relay)";
    std::cout << "\n";
    if (report_.contains("drain_to_ceiling_ratio"))
      std::cout << "ratio drain 1 relay / broker ceiling = " << fmt(report_["drain_to_ceiling_ratio"].get<double>(), 2)
                << " (median of per-round ratios; target >= 0.80); 2 relays / 1 relay = "
                << fmt(report_["drain_2proc_to_1proc_ratio"].get<double>(), 2) << "\n";
  }

  const BenchOptions& o_;
  RelaySpec spec_;
  json report_;
  std::vector<double> cpu_us_;
  double peak_rss_ = 0;
};

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  BenchOptions options;
  try {
    options = parse_bench_options(argc, argv);
  } catch (const BenchUsageError& e) {
    std::string what = e.what();
    if (what.empty()) {
      std::cout << bench_usage();
      return 0;
    }
    std::cerr << "outbox-bench: " << what << "\n" << bench_usage();
    return 2;
  }
  RelaySpec spec;
  spec.binary = options.relay_bin.empty() ? OUTBOX_RELAY_BIN : options.relay_bin;
  spec.batch_size = options.batch_size;
  spec.settings = options.relay_settings;
  if (::access(spec.binary.c_str(), X_OK) != 0) {
    std::cerr << "outbox-bench: --relay-bin: '" << spec.binary << "' is not an executable file\n";
    return 2;
  }
  int rc = 0;
  try {
    // Before any thread: it forks. From here on, whatever ends the run, its schema,
    // queues, relays and pinned CPUs are undone.
    Janitor::start({{"schema", &BenchEnv::drop_recorded_schema},
                    {"queue", &BenchEnv::remove_recorded_queue},
                    {"relay", &RelayRunner::kill_recorded},
                    {"cpus", &BrokerCpuIsolation::restore_recorded}});
    auto report = Bench(options, spec).run();
    if (!options.json_path.empty()) {
      std::ofstream out(options.json_path);
      out << report.dump(2) << "\n";
      if (!out) throw BenchError("cannot write " + options.json_path);
      std::cout << "JSON summary: " << options.json_path << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "outbox-bench: failed: " << e.what() << "\n";
    rc = 1;
  }
  Janitor::finish();
  return rc;
}
