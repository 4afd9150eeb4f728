#include "chaos_run.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "amqp_admin.h"
#include "ledger_check.h"
#include "ledger_consumer.h"
#include "private_servers.h"
#include "producer_pool.h"
#include "relay_fleet.h"
#include "sequenced_consumer.h"
#include "tcp_proxy.h"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kSchema = "chaos";
constexpr int kConfirmTimeoutMs = 3000;
constexpr int kMaxAttempts = 8;
// Rows a relay may hold between publish and mark: a batch, with room for relays
// that pipeline several batches. Bounds the duplicates one disruption may cause.
constexpr int kInFlightBatches = 4;

Topology topology() { return Topology{}; }

}  // namespace

ChaosRun::ChaosRun(ChaosOptions options) : options_(std::move(options)) {
  if (options_.seed == 0) options_.seed = std::random_device{}() | 1u;
  rng_.seed(options_.seed);
}

ChaosRun::~ChaosRun() {
  // Order matters: relays and traffic before the servers they use.
  relays_.reset();
  producers_.reset();
  consumer_.reset();
  limited_consumer_.reset();
  sequenced_.reset();
  pg_proxy_.reset();
  amqp_proxy_.reset();
  if (servers_ && options_.keep_servers) servers_->keep_running();
  servers_.reset();
}

double ChaosRun::uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

void ChaosRun::log(const std::string& line) {
  auto s = std::chrono::duration<double>(Clock::now() - t0_).count();
  std::fprintf(stderr, "[chaos %7.1f s] %s\n", s, line.c_str());
}

std::int64_t ChaosRun::scalar(const std::string& sql) { return servers_->scalar(sql); }

std::string ChaosRun::relay_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {options_.relay_bin};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_process(argv);
  if (r.exit_code != 0)
    throw std::runtime_error("outbox-relay " + args[0] + " failed (exit " + std::to_string(r.exit_code) +
                             "): " + r.output);
  return r.output;
}

std::string ChaosRun::write_config(const std::string& name, const std::string& dsn, const std::string& uri) {
  std::string path = log_dir_ + "/" + name;
  std::ofstream out(path);
  out << "postgres:\n  dsn: " << dsn << "\n  schema: " << kSchema
      << "\n  statement_timeout_ms: 5000\n  idle_in_transaction_timeout_ms: 8000\n"
         "  connect_timeout_s: 2\n  keepalives_idle_s: 2\n"
      << "amqp:\n  uri: " << uri << "\n  heartbeat_s: 2\n  confirm_timeout_ms: " << kConfirmTimeoutMs
      << "\n  connect_timeout_ms: 2000\n"
      << "relay:\n  batch_size: " << options_.batch_size << "\n  poll_interval_ms: 50\n  max_attempts: " << kMaxAttempts
      << "\n  backoff_initial_ms: 200\n  backoff_max_ms: 2000\n  backoff_factor: 2.0\n"
         "  summary_interval_s: 10\n"
      << "log:\n  level: info\n";
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

void ChaosRun::set_up() {
  log_dir_ = "/tmp/outbox-chaos-logs-" + std::to_string(::getpid());
  run_process({"/bin/mkdir", "-p", log_dir_});
  servers_ = std::make_unique<PrivateServers>(options_.repo);
  log("starting private servers in " + servers_->dir() + " (PostgreSQL port " + std::to_string(servers_->pg_port()) +
      ", AMQP port " + std::to_string(servers_->amqp_port()) + ")");
  servers_->start();  // before any thread: it forks the reaper

  pg_proxy_ = std::make_unique<testenv::TcpProxy>("127.0.0.1", servers_->pg_port());
  amqp_proxy_ = std::make_unique<testenv::TcpProxy>("127.0.0.1", servers_->amqp_port());
  // Connection strings travel as ${ENV} references, as a deployment would keep them.
  // (No thread reads the environment yet: the proxies' threads never do.)
  ::setenv("OUTBOX_CHAOS_PG_DSN", servers_->pg_dsn().c_str(), 1);
  ::setenv("OUTBOX_CHAOS_AMQP_URI", servers_->amqp_uri().c_str(), 1);
  ::setenv("OUTBOX_CHAOS_PROXIED_PG_DSN",
           ("host=127.0.0.1 port=" + std::to_string(pg_proxy_->port()) + " user=postgres dbname=postgres").c_str(), 1);
  ::setenv("OUTBOX_CHAOS_PROXIED_AMQP_URI",
           ("amqp://guest:guest@127.0.0.1:" + std::to_string(amqp_proxy_->port()) + "/%2f").c_str(), 1);
  admin_config_ = write_config("admin.yaml", "${OUTBOX_CHAOS_PG_DSN}", "${OUTBOX_CHAOS_AMQP_URI}");
  auto migrated = relay_command({"migrate", "--config", admin_config_});
  log(migrated.substr(0, migrated.find('\n')));
  AmqpAdmin(std::string("127.0.0.1"), servers_->amqp_port()).declare(topology());

  relay_config_ = write_config("relay.yaml", "${OUTBOX_CHAOS_PROXIED_PG_DSN}", "${OUTBOX_CHAOS_PROXIED_AMQP_URI}");

  auto t = topology();
  consumer_ = std::make_unique<LedgerConsumer>(
      ConsumerOptions{"127.0.0.1", servers_->amqp_port(), t.queue, 500, milliseconds(0), {}}, ledger_);
  limited_consumer_ = std::make_unique<LedgerConsumer>(
      ConsumerOptions{"127.0.0.1", servers_->amqp_port(), t.limited_queue, 1, milliseconds(0), {}}, ledger_);
  // The consumer SDK with its sequence guard, on a queue of its own, before any event.
  sequenced_ = std::make_unique<SequencedConsumer>(servers_->pg_dsn(), servers_->amqp_uri(), kSchema, t);
  sequenced_->start();

  ProducerOptions p;
  p.dsn = servers_->pg_dsn();
  p.schema = kSchema;
  p.topology = t;
  p.threads = options_.producers;
  p.rate = options_.rate;
  p.seed = options_.seed;
  producers_ = std::make_unique<ProducerPool>(p);  // paused until the baseline

  relays_ = std::make_unique<RelayFleet>(options_.relay_bin, relay_config_, log_dir_, options_.relays);
  relays_->start_all();
}

// A short fault-free phase: ordinary traffic only, drained completely. Returns the
// duplicates seen, which must be none.
std::uint64_t ChaosRun::baseline() {
  producers_->set_orders_only(true);
  producers_->set_paused(false);
  std::this_thread::sleep_for(seconds(5));
  producers_->set_paused(true);
  std::this_thread::sleep_for(milliseconds(300));  // transactions in progress finish
  auto deadline = Clock::now() + seconds(60);
  std::int64_t rows = 0;
  while (Clock::now() < deadline) {
    rows = scalar("SELECT count(*) FROM " + kSchema + ".outbox");
    if (scalar("SELECT count(*) FROM " + kSchema + ".outbox WHERE published_at IS NULL") == 0 &&
        static_cast<std::int64_t>(ledger_.snapshot().size()) >= rows)
      break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  std::uint64_t dups = 0;
  for (const auto& [id, r] : ledger_.snapshot()) dups += r.fresh > 1 ? r.fresh - 1 : 0;
  log("baseline: " + std::to_string(rows) + " messages without faults, " + std::to_string(dups) + " duplicates");
  producers_->set_orders_only(false);
  return dups;
}

// Runs on a thread of its own so that slow server faults (a RabbitMQ restart takes
// seconds) do not hold up the relay kills and connection cuts.
void ChaosRun::server_faults(Clock::time_point start) {
  enum Kind { kAlarm, kRabbitRestart, kPause, kPgRestart };
  const int cycles = std::max(1, options_.duration_s / 150);
  const double spacing = options_.duration_s / (4.0 * cycles + 1);
  for (int i = 0; i < 4 * cycles && !chaos_over_; ++i) {
    std::this_thread::sleep_until(start + milliseconds(static_cast<long long>(spacing * (i + 1) * 1000)));
    if (chaos_over_) break;
    try {
      switch (static_cast<Kind>(i % 4)) {
        case kAlarm:
          log("fault: memory alarm (vm_memory_high_watermark 0.0001) for 6 s");
          servers_->rabbitmqctl({"set_vm_memory_high_watermark", "0.0001"});
          ++faults_.memory_alarms;
          std::this_thread::sleep_for(seconds(6));
          servers_->rabbitmqctl({"set_vm_memory_high_watermark", "0.6"});
          break;
        case kRabbitRestart:
          log("fault: RabbitMQ restart");
          ++faults_.rabbitmq_restarts;
          servers_->restart_rabbitmq();
          log("RabbitMQ is back");
          break;
        case kPause:
          log("fault: SIGSTOP of the broker for " + std::to_string(kConfirmTimeoutMs / 1000 + 2) + " s");
          ++faults_.broker_pauses;
          servers_->pause_rabbitmq();
          std::this_thread::sleep_for(milliseconds(kConfirmTimeoutMs + 2000));
          servers_->resume_rabbitmq();
          break;
        case kPgRestart:
          log("fault: PostgreSQL restart");
          ++faults_.postgres_restarts;
          servers_->restart_postgres();
          break;
      }
    } catch (const std::exception& e) {
      log(std::string("server fault failed: ") + e.what());
    }
  }
}

void ChaosRun::chaos_phase() {
  const auto start = Clock::now();
  const auto end = start + seconds(options_.duration_s);
  const double mean_kill_s = std::min(6.0, options_.duration_s / (options_.min_kills * 1.5 + 1));
  std::vector<Clock::time_point> restart_at(options_.relays, Clock::time_point::max());
  auto at = [&](double s) { return Clock::now() + milliseconds(static_cast<long long>(s * 1000)); };
  auto next_kill = at(uniform(0.5, 1.5) * mean_kill_s);
  auto next_cut = at(uniform(3, 8));
  auto next_stall = at(4);
  auto late_at = start + seconds(options_.duration_s / 2);
  bool stalled = false, late_done = false;
  std::thread server_thread([this, start] { server_faults(start); });

  while (Clock::now() < end) {
    auto now = Clock::now();
    faults_.unexpected_relay_exits += relays_->reap_unexpected_exits();
    if (now >= next_kill) {
      std::vector<int> up;
      for (int i = 0; i < relays_->size(); ++i)
        if (relays_->running(i)) up.push_back(i);
      if (!up.empty()) {
        int slot = up[std::uniform_int_distribution<std::size_t>(0, up.size() - 1)(rng_)];
        relays_->kill(slot);
        ++faults_.relay_kills;
        restart_at[slot] = at(uniform(0.1, 1.5));
      }
      next_kill = at(uniform(0.5, 1.5) * mean_kill_s);
    }
    for (int i = 0; i < relays_->size(); ++i)
      if (now >= restart_at[i]) {
        relays_->restart(i);
        restart_at[i] = Clock::time_point::max();
      }
    if (now >= next_cut) {
      int which = std::uniform_int_distribution<int>(0, 2)(rng_);
      int n = 0;
      if (which != 1) n += pg_proxy_->cut_all();
      if (which != 0) n += amqp_proxy_->cut_all();
      ++faults_.cut_events;
      faults_.cut_connections += n;
      next_cut = at(uniform(3, 8));
    }
    if (now >= next_stall) {  // the limited queue fills while its consumer stalls: nacks
      stalled = !stalled;
      limited_consumer_->set_paused(stalled);
      if (stalled) ++faults_.consumer_stalls;
      next_stall = at(4);
    }
    if (!late_done && now >= late_at) {
      try {
        AmqpAdmin(std::string("127.0.0.1"), servers_->amqp_port()).declare_late_exchange(topology());
        late_done = true;
        ++faults_.late_exchange;
        log("the late exchange now exists");
      } catch (const std::exception&) {
        late_at = at(1);  // the broker may be restarting
      }
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  chaos_over_ = true;
  server_thread.join();
  for (int i = 0; i < relays_->size(); ++i) relays_->restart(i);
  limited_consumer_->set_paused(false);
  if (!late_done) {
    AmqpAdmin(std::string("127.0.0.1"), servers_->amqp_port()).declare_late_exchange(topology());
    ++faults_.late_exchange;
  }
}

// Heals every fault: the broker runs unpaused without alarm, proxies forward.
void ChaosRun::heal() {
  servers_->resume_rabbitmq();
  for (int i = 0; i < 20; ++i) {
    try {
      servers_->rabbitmqctl({"set_vm_memory_high_watermark", "0.6"});
      break;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(milliseconds(500));
    }
  }
  pg_proxy_->set_stalled(false);
  amqp_proxy_->set_stalled(false);
}

// Waits until every row is published or parked. Parked rows of the classes that can
// be delivered now (nacked, late exchange) are requeued with the CLI.
bool ChaosRun::drain() {
  const auto deadline = Clock::now() + seconds(options_.drain_timeout_s);
  const std::string outbox = kSchema + ".outbox";
  auto next_requeue = Clock::now() + seconds(2);
  while (Clock::now() < deadline) {
    faults_.unexpected_relay_exits += relays_->reap_unexpected_exits();
    auto pending = scalar("SELECT count(*) FROM " + outbox + " WHERE published_at IS NULL AND parked_at IS NULL");
    auto recoverable = scalar("SELECT count(*) FROM " + outbox + " WHERE parked_at IS NOT NULL AND message_type IN ('" +
                              kind::kNack + "','" + kind::kLate + "')");
    if (pending == 0 && recoverable == 0) return true;
    if (recoverable > 0 && Clock::now() >= next_requeue) {
      for (const auto& type : {kind::kNack, kind::kLate}) {
        const auto parked = scalar("SELECT count(*) FROM " + outbox +
                                   " WHERE parked_at IS NOT NULL AND message_type = '" + type + "'");
        if (parked == 0) continue;
        // --type changes rows only with --expect N, the count; a row parked since makes
        // it change nothing (exit 2 or 1), and the next round tries again.
        auto r = run_process({options_.relay_bin, "dead", "requeue", "--config", admin_config_, "--type", type,
                              "--expect", std::to_string(parked), "--json"});
        const auto at = r.output.find("\"requeued\":");
        if (r.exit_code == 0 && at != std::string::npos) requeued_ += std::atoll(r.output.c_str() + at + 11);
        log("dead requeue --type " + type + " --expect " + std::to_string(parked) + ": exit " +
            std::to_string(r.exit_code) + ", " + r.output.substr(0, r.output.find('\n')));
      }
      next_requeue = Clock::now() + seconds(3);
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  return false;
}

void ChaosRun::wait_consumers_idle() {
  AmqpAdmin admin(std::string("127.0.0.1"), servers_->amqp_port());
  auto t = topology();
  auto last = ledger_.deliveries();
  auto quiet_since = Clock::now();
  const auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(250));
    auto now = ledger_.deliveries();
    if (now != last) {
      last = now;
      quiet_since = Clock::now();
      continue;
    }
    if (Clock::now() - quiet_since > seconds(2) && admin.ready(t.queue) == 0 && admin.ready(t.limited_queue) == 0)
      return;
  }
}

namespace {

void row(std::ostream& out, const std::string& label, const std::string& value) {
  out << "  " << label << std::string(label.size() < 46 ? 46 - label.size() : 1, ' ') << value << "\n";
}
std::string num(std::uint64_t v) { return std::to_string(v); }

}  // namespace

int ChaosRun::run() {
  t0_ = Clock::now();
  std::vector<std::string> failures;
  std::uint64_t baseline_dups = 0;
  std::vector<int> exit_codes;
  CheckResult check;
  std::int64_t nacked_rows = 0, returned = 0, missing_attempts = 0;
  std::vector<std::string> sequence_failures{"not checked"};
  try {
    set_up();
    baseline_dups = baseline();
    if (baseline_dups != 0) failures.push_back("duplicates without any fault: " + num(baseline_dups));
    log("chaos phase: " + std::to_string(options_.duration_s) + " s");
    producers_->set_paused(false);
    chaos_phase();
    log("chaos over: healing, stopping producers, draining");
    heal();
    producers_->stop();
    // Broker reactions, read before requeue resets attempts.
    nacked_rows = scalar("SELECT count(*) FROM " + kSchema + ".outbox WHERE last_error LIKE '%nack%'");
    if (!drain())
      failures.push_back("rows still pending after " + std::to_string(options_.drain_timeout_s) + " s of drain");
    returned = scalar("SELECT coalesce(sum(attempts), 0) FROM " + kSchema + ".outbox WHERE message_type = '" +
                      kind::kUnroutable + "'");
    missing_attempts = scalar("SELECT coalesce(sum(attempts), 0) FROM " + kSchema + ".outbox WHERE message_type = '" +
                              kind::kMissing + "'");
    wait_consumers_idle();
    // Every shared key's events applied once, in order, and as many as the outbox numbered.
    sequence_failures = sequenced_->wait_and_check(90);
    failures.insert(failures.end(), sequence_failures.begin(), sequence_failures.end());
    exit_codes = relays_->stop_all(30);
    for (int code : exit_codes)
      if (code != 0) failures.push_back("a relay did not exit 0 on SIGTERM (" + std::to_string(code) + ")");
    const std::uint64_t disruptions = static_cast<std::uint64_t>(faults_.relay_kills) +
                                      relays_->count_log_lines("channel closed by broker") +
                                      static_cast<std::uint64_t>(options_.relays) *
                                          (faults_.cut_events + faults_.rabbitmq_restarts + faults_.postgres_restarts +
                                           faults_.broker_pauses + faults_.memory_alarms + 1);
    check = check_ledger(servers_->pg_dsn(), kSchema, ledger_, producers_->rolled_back_ids(),
                         {kind::kOrder, kind::kNack, kind::kLate},
                         disruptions * static_cast<std::uint64_t>(options_.batch_size) * kInFlightBatches);
    failures.insert(failures.end(), check.failures.begin(), check.failures.end());
  } catch (const std::exception& e) {
    failures.push_back(std::string("run aborted: ") + e.what());
  }
  if (faults_.relay_kills < options_.min_kills)
    failures.push_back("only " + std::to_string(faults_.relay_kills.load()) + " relay kills, at least " +
                       std::to_string(options_.min_kills) + " required");
  if (faults_.unexpected_relay_exits > 0)
    failures.push_back(std::to_string(faults_.unexpected_relay_exits.load()) + " relay exits nobody asked for");
  int blocked_lines = relays_ ? relays_->count_log_lines("blocked publishing") : 0;
  if (faults_.memory_alarms > 0 && blocked_lines == 0)
    failures.push_back("memory alarm raised but no relay logged connection.blocked");

  auto stats = producers_ ? producers_->stats() : ProducerStats{};
  std::ostringstream t;
  t << "\n== outbox-relay chaos run: seed " << options_.seed << ", " << options_.duration_s << " s of faults, "
    << options_.relays << " relays, " << options_.rate << " msg/s, batch " << options_.batch_size << " ==\n";
  t << "faults injected\n";
  row(t, "relay SIGKILL at a random moment, restarted", num(faults_.relay_kills));
  row(t, "connections cut mid-stream (proxy RST)",
      num(faults_.cut_events) + " cuts, " + num(faults_.cut_connections) + " connections");
  row(t, "RabbitMQ restart", num(faults_.rabbitmq_restarts));
  row(t, "PostgreSQL restart", num(faults_.postgres_restarts));
  row(t, "broker SIGSTOP > confirm timeout", num(faults_.broker_pauses));
  row(t, "memory alarm (set_vm_memory_high_watermark)", num(faults_.memory_alarms));
  row(t, "limited queue stalled (reject-publish nacks)", num(faults_.consumer_stalls));
  row(t, "exchange missing, created mid-run", num(faults_.late_exchange));
  t << "what the relays saw\n";
  row(t, "rows nacked by the broker", num(nacked_rows));
  row(t, "unroutable returns (attempts)", num(returned));
  row(t, "missing-exchange channel closes (attempts)", num(missing_attempts));
  if (relays_) {
    row(t, "channel closed by broker (relay logs)", num(relays_->count_log_lines("channel closed by broker")));
    row(t, "connection.blocked (relay logs)", num(blocked_lines));
    row(t, "sessions (re)connected (relay logs)",
        num(relays_->count_log_lines("connected to PostgreSQL") +
            relays_->count_log_lines("connected again to PostgreSQL")));
  }
  row(t, "relay exits nobody asked for", num(faults_.unexpected_relay_exits));
  t << "messages\n";
  row(t, "committed (outbox rows)", num(check.rows));
  row(t, "rolled back on purpose", num(stats.rolled_back_messages));
  row(t, "producer commits in doubt", num(stats.in_doubt_messages));
  row(t, "received (distinct message ids)", num(check.received));
  row(t, "deliveries (with broker redeliveries)", num(check.deliveries));
  row(t, "published", num(check.published));
  row(t, "parked with a reason (poison rows)", num(check.parked));
  row(t, "requeued with `outbox-relay dead requeue`", num(requeued_));
  t << "result\n";
  row(t, "lost", num(check.lost));
  row(t, "unexpected", num(check.unexpected));
  row(t, "duplicates (extra copies / rows)", num(check.duplicates) + " / " + num(check.duplicated_rows));
  row(t, "pending at the end", num(check.pending));
  row(t, "scheduled rows (deliver_at) / published early", num(check.scheduled) + " / " + num(check.early));
  row(t, "duplicates in the fault-free baseline", num(baseline_dups));
  if (sequenced_) {
    row(t, "sequence guard: applied / held early", num(sequenced_->applied()) + " / " + num(sequenced_->held()));
    row(t, "sequence guard: every key in step, in order", sequence_failures.empty() ? "yes" : "NO");
  }
  std::string codes;
  for (int c : exit_codes) codes += (codes.empty() ? "" : " ") + std::to_string(c);
  row(t, "relay exit codes on SIGTERM", codes.empty() ? "-" : codes);
  for (const auto& s : check.samples) t << "  sample: " << s << "\n";
  for (const auto& f : failures) t << "FAILED: " << f << "\n";
  t << "took " << static_cast<int>(std::chrono::duration<double>(Clock::now() - t0_).count())
    << " s in all (servers, baseline, faults, drain, check)\n";
  t << "verdict: " << (failures.empty() ? "PASS" : "FAIL") << "\n";
  std::cout << t.str() << std::flush;
  if (failures.empty()) run_process({"/bin/rm", "-rf", log_dir_});
  else std::cout << "relay logs and configs kept in " << log_dir_ << "\n";
  return failures.empty() ? 0 : 1;
}

}  // namespace chaos
