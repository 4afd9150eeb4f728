#include "cluster_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "amqp_admin.h"
#include "ledger_check.h"
#include "ledger_consumer.h"
#include "loopback_blackhole.h"
#include "private_servers.h"
#include "producer_pool.h"
#include "relay_fleet.h"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kSchema = "chaos";
constexpr int kConfirmTimeoutMs = 3000;
constexpr int kInFlightBatches = 4;  // as in ChaosRun: bounds the copies one disruption may cause
// After each fault is healed, traffic runs this long before the next one, so that
// every pause is measured on its own.
constexpr auto kSettle = seconds(3);
constexpr auto kBlackhole = seconds(8);

Topology topology() {
  Topology t;
  t.quorum = true;
  return t;
}

std::string num(std::uint64_t v) { return std::to_string(v); }

}  // namespace

ClusterRun::ClusterRun(ChaosOptions options) : options_(std::move(options)) {
  if (options_.seed == 0) options_.seed = std::random_device{}() | 1u;
}

ClusterRun::~ClusterRun() {
  monitor_.reset();
  relays_.reset();
  producers_.reset();
  consumer_.reset();
  if (servers_ && options_.keep_servers) servers_->keep_running();
  servers_.reset();
}

void ClusterRun::log(const std::string& line) {
  auto s = std::chrono::duration<double>(Clock::now() - t0_).count();
  std::fprintf(stderr, "[cluster %7.1f s] %s\n", s, line.c_str());
}

std::int64_t ClusterRun::scalar(const std::string& sql) { return servers_->scalar(sql); }

// The relays get every node (amqp.uris, shuffled) and both PostgreSQL servers
// (target_session_attrs=read-write); the admin config the first node only.
std::string ClusterRun::write_config(const std::string& name, bool admin) {
  std::string path = log_dir_ + "/" + name;
  std::ofstream out(path);
  out << "postgres:\n  dsn: " << servers_->pg_dsn() << "\n  schema: " << kSchema
      << "\n  statement_timeout_ms: 5000\n  idle_in_transaction_timeout_ms: 8000\n"
         "  connect_timeout_s: 2\n  keepalives_idle_s: 2\n  tcp_user_timeout_ms: 3000\n"
      << "amqp:\n";
  if (admin) {
    out << "  uri: " << servers_->amqp_uri() << "\n";
  } else {
    out << "  uris:\n";
    for (auto port : servers_->amqp_ports()) out << "    - amqp://guest:guest@127.0.0.1:" << port << "/%2f\n";
    out << "  endpoint_order: shuffled\n";
  }
  out << "  heartbeat_s: 2\n  confirm_timeout_ms: " << kConfirmTimeoutMs << "\n  connect_timeout_ms: 2000\n"
      << "relay:\n  batch_size: " << options_.batch_size
      << "\n  poll_interval_ms: 50\n  max_attempts: 8\n"
         "  backoff_initial_ms: 200\n  backoff_max_ms: 2000\n  backoff_factor: 2.0\n  summary_interval_s: 10\n"
      << "log:\n  level: info\n";
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

void ClusterRun::set_up() {
  log_dir_ = "/tmp/outbox-chaos-logs-" + std::to_string(::getpid());
  run_process({"/bin/mkdir", "-p", log_dir_});
  servers_ = std::make_unique<PrivateServers>(options_.repo, ServerLayout::kCluster);
  log("starting a 3-node RabbitMQ cluster (ports " + std::to_string(servers_->amqp_port()) +
      "+0..2) and PostgreSQL primary + standby (ports " + std::to_string(servers_->pg_port()) + "+0..1) in " +
      servers_->dir());
  servers_->start();  // before any thread: it forks the reaper
  log("cluster up");
  auto admin_config = write_config("admin.yaml", true);
  auto r = run_process({options_.relay_bin, "migrate", "--config", admin_config});
  if (r.exit_code != 0) throw std::runtime_error("outbox-relay migrate failed: " + r.output);
  AmqpAdmin(std::string("127.0.0.1"), servers_->amqp_port()).declare(topology());

  ConsumerOptions c;
  c.queue = topology().queue;
  c.ports = servers_->amqp_ports();
  consumer_ = std::make_unique<LedgerConsumer>(c, ledger_);
  ProducerOptions p;
  // Producers and the monitor notice a blackholed primary in seconds, as the relays do.
  const std::string dsn = servers_->pg_dsn() +
                          " connect_timeout=2 tcp_user_timeout=3000 keepalives_idle=2 keepalives_interval=1";
  p.dsn = dsn;
  p.schema = kSchema;
  p.topology = topology();
  p.threads = options_.producers;
  p.rate = options_.rate;
  p.seed = options_.seed;
  p.orders_only = true;                            // the cluster run is about the servers, not poison rows
  producers_ = std::make_unique<ProducerPool>(p);  // paused until the run starts
  relays_ = std::make_unique<RelayFleet>(options_.relay_bin, write_config("relay.yaml", false), log_dir_,
                                         options_.relays);
  relays_->start_all();
  monitor_ = std::make_unique<PublishMonitor>(dsn, kSchema);
}

int ClusterRun::relay_node(int slot) const {
  std::ifstream in(relays_->log_path(slot));
  const std::string needle = "and AMQP 127.0.0.1:";
  int port = 0;
  for (std::string line; std::getline(in, line);)
    if (auto at = line.find(needle); at != std::string::npos) port = std::atoi(line.c_str() + at + needle.size());
  const int node = port - servers_->amqp_port() + 1;
  return node >= 1 && node <= 3 ? node : 0;
}

int ClusterRun::leader_node() {
  for (int n = 1; n <= 3; ++n) {
    try {
      auto out = servers_->node_rabbitmqctl(n, {"-q", "list_queues", "name", "leader", "--no-table-headers"});
      // One line per queue, "name<TAB>leader"; a classic queue has no leader, so the
      // columns are read per line, never as a stream of words.
      std::istringstream in(out);
      for (std::string line; std::getline(in, line);) {
        const auto tab = line.find('\t');
        if (tab == std::string::npos || line.substr(0, tab) != topology().queue) continue;
        const std::string leader = line.substr(tab + 1);
        auto at = leader.find("outbox");
        int node = at == std::string::npos ? 0 : std::atoi(leader.c_str() + at + 6) - servers_->amqp_port() + 1;
        if (node >= 1 && node <= 3) return node;
      }
    } catch (const std::exception&) {
      // that node is down or booting: ask the next
    }
  }
  return 0;
}

bool ClusterRun::move_leader(int node) {
  const std::string target = "outbox" + std::to_string(servers_->amqp_port() + node - 1) + "@localhost";
  const std::string expr = "{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, <<\"" + topology().queue +
                           "\">>)), rabbit_quorum_queue:transfer_leadership(Q, '" + target + "').";
  for (int attempt = 0; attempt < 20 && leader_node() != node; ++attempt) {
    try {
      const auto out = servers_->node_rabbitmqctl(node, {"eval", expr});
      if (attempt == 0) log("moving the queue leader to node " + std::to_string(node) + ": " + out);
    } catch (const std::exception& e) {
      log(std::string("moving the queue leader: ") + e.what());
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  return leader_node() == node;
}

void ClusterRun::kill_node(int node) {
  servers_->kill_node(node);
  std::this_thread::sleep_for(seconds(4));  // the cluster runs on two nodes for a while
  servers_->start_node(node);
}

void ClusterRun::stop_and_start_node(int node) {
  servers_->stop_node(node);
  std::this_thread::sleep_for(seconds(4));
  servers_->start_node(node);
}

void ClusterRun::fail_over_postgres(int) { servers_->pg_failover(); }

void ClusterRun::blackhole_amqp(int node) {
  testenv::LoopbackBlackhole hole(servers_->amqp_port() + node - 1);
  std::this_thread::sleep_for(kBlackhole);
}

void ClusterRun::blackhole_postgres(int) {
  testenv::LoopbackBlackhole hole(servers_->pg_port());  // the primary until the failover
  std::this_thread::sleep_for(kBlackhole);
}

void ClusterRun::inject(const std::string& kind, const std::string& what, void (ClusterRun::*act)(int), int node,
                        bool half_open) {
  log("fault: " + kind + " (" + what + ")");
  const auto from = Clock::now();
  (this->*act)(node);
  // Until publishing runs again (so the pause is measured whole, not cut off), then
  // some traffic before the next fault.
  const auto healed = Clock::now();
  while (!monitor_->grew_since(healed) && Clock::now() - healed < seconds(60))
    std::this_thread::sleep_for(milliseconds(100));
  const double resume = std::chrono::duration<double>(Clock::now() - healed).count();
  std::this_thread::sleep_for(kSettle);
  const double pause = monitor_->longest_pause(from, Clock::now());
  faults_.push_back({kind, what, std::chrono::duration<double>(from - phase_start_).count(), pause, half_open, resume});
  log("healed: publishing stopped for at most " + std::to_string(pause).substr(0, 5) + " s; it ran again " +
      std::to_string(resume).substr(0, 4) + " s after the heal");
  unexpected_exits_ += relays_->reap_unexpected_exits();
}

// One round is: SIGKILL of the node a relay is on (one relay per round, in turn),
// from the second round on a SIGKILL of the quorum queue's leader, a clean stop of
// the leader; the first round ends with the PostgreSQL failover. Rounds repeat while
// --duration lasts; the first always completes (the CI variant runs just that one).
void ClusterRun::fault_phase() {
  phase_start_ = Clock::now();
  const auto end = phase_start_ + seconds(options_.duration_s);
  for (int round = 0; round == 0 || Clock::now() < end; ++round) {
    if (round == 0) {  // the relay's node and the queue's leader at once
      const int node = relay_node(0);
      if (node != 0 && move_leader(node))
        inject("SIGKILL of relay 0's node, the queue leader's", "node " + std::to_string(node), &ClusterRun::kill_node,
               node);
      else leader_fault_skipped_ = true;
    }
    const int slot = round % relays_->size();
    int node = relay_node(slot);
    if (node == 0) node = 1 + round % 3;
    inject("SIGKILL of a relay's broker node", "node " + std::to_string(node) + ", relay " + std::to_string(slot),
           &ClusterRun::kill_node, node);
    if (round >= 1) {  // the Raft leader gone without a word: the members elect another
      int leader = leader_node();
      if (leader == 0) leader = 1 + (round + 2) % 3;
      inject("SIGKILL of the queue leader's node", "node " + std::to_string(leader), &ClusterRun::kill_node, leader);
    }
    int leader = leader_node();
    if (leader == 0) leader = 1 + (round + 1) % 3;
    inject("clean stop of the queue leader's node", "node " + std::to_string(leader), &ClusterRun::stop_and_start_node,
           leader);
    if (round == 0) {
      // Half-open links: packets dropped, nothing closed. What counts is how soon
      // publishing runs again once the link heals.
      const int node = relay_node(0) != 0 ? relay_node(0) : 1;
      inject("blackholed AMQP link (relay 0's node)", "node " + std::to_string(node), &ClusterRun::blackhole_amqp, node,
             true);
      inject("blackholed PostgreSQL link (the primary)", "primary", &ClusterRun::blackhole_postgres, 0, true);
      inject("PostgreSQL failover (immediate stop, promote)", "primary to standby", &ClusterRun::fail_over_postgres, 0);
    }
  }
}

bool ClusterRun::drain() {
  const auto deadline = Clock::now() + seconds(options_.drain_timeout_s);
  while (Clock::now() < deadline) {
    unexpected_exits_ += relays_->reap_unexpected_exits();
    if (scalar("SELECT count(*) FROM " + kSchema + ".outbox WHERE published_at IS NULL") == 0) {
      // The consumer is idle once the ledger stops growing.
      auto last = ledger_.deliveries();
      for (int quiet = 0; quiet < 8;) {
        std::this_thread::sleep_for(milliseconds(250));
        auto now = ledger_.deliveries();
        quiet = now == last ? quiet + 1 : 0;
        last = now;
      }
      return true;
    }
    std::this_thread::sleep_for(milliseconds(300));
  }
  return false;
}

int ClusterRun::run() {
  t0_ = Clock::now();
  std::vector<std::string> failures;
  CheckResult check;
  std::vector<int> exit_codes;
  try {
    set_up();
    producers_->set_paused(false);
    std::this_thread::sleep_for(seconds(3));  // traffic flows before the first fault
    fault_phase();
    log("faults over: stopping producers, draining");
    producers_->stop();
    if (!drain())
      failures.push_back("rows still pending after " + std::to_string(options_.drain_timeout_s) + " s of drain");
    exit_codes = relays_->stop_all(30);
    for (int code : exit_codes)
      if (code != 0) failures.push_back("a relay did not exit 0 on SIGTERM (" + std::to_string(code) + ")");
    // Each fault may cost every relay the rows it held between ack and mark.
    const std::uint64_t disruptions = (faults_.size() + 1) * static_cast<std::uint64_t>(options_.relays);
    check = check_ledger(servers_->pg_dsn(), kSchema, ledger_, producers_->rolled_back_ids(), {kind::kOrder},
                         disruptions * static_cast<std::uint64_t>(options_.batch_size) * kInFlightBatches);
    failures.insert(failures.end(), check.failures.begin(), check.failures.end());
  } catch (const std::exception& e) {
    failures.push_back(std::string("run aborted: ") + e.what());
  }
  if (unexpected_exits_ > 0) failures.push_back(std::to_string(unexpected_exits_) + " relay exits nobody asked for");
  if (leader_fault_skipped_)
    failures.push_back("the queue's leader could not be moved to relay 0's node: its fault did not run");
  for (const auto& f : faults_) {
    const double measured = f.half_open ? f.resume_s : f.pause_s;
    if (options_.max_pause_s > 0 && measured > options_.max_pause_s)
      failures.push_back(f.kind + " (" + f.what + ") " +
                         (f.half_open ? "resumed publishing only " : "stopped publishing for ") +
                         std::to_string(measured).substr(0, 5) + " s" + (f.half_open ? " after the heal" : "") +
                         ", over --max-pause " + std::to_string(options_.max_pause_s).substr(0, 4) + " s");
  }

  std::map<std::string, std::pair<int, double>> by_kind;  // count, longest pause
  for (const auto& f : faults_) {
    auto& k = by_kind[f.kind];
    ++k.first;
    k.second = std::max(k.second, f.pause_s);
  }
  auto stats = producers_ ? producers_->stats() : ProducerStats{};
  std::ostringstream t;
  char buf[160];
  t << "\n== outbox-relay cluster chaos run: seed " << options_.seed << ", 3 RabbitMQ nodes (quorum queue), "
    << "PostgreSQL primary + standby, " << options_.relays << " relays with amqp.uris, " << options_.rate
    << " msg/s, batch " << options_.batch_size << " ==\n";
  t << "faults                                          count   longest pause\n";
  for (const auto& [kind, k] : by_kind) {
    std::snprintf(buf, sizeof buf, "  %-46s %5d   %8.1f s\n", kind.c_str(), k.first, k.second);
    t << buf;
  }
  t << "each fault (seconds into the fault phase)\n";
  for (const auto& f : faults_) {
    std::snprintf(buf, sizeof buf, "  %6.1f s  %-44s %-18s pause %5.1f s", f.at_s, f.kind.c_str(), f.what.c_str(),
                  f.pause_s);
    t << buf;
    if (f.half_open) {
      std::snprintf(buf, sizeof buf, " (%.0f s blackholed; publishing again %.1f s after the heal)",
                    std::chrono::duration<double>(kBlackhole).count(), f.resume_s);
      t << buf;
    }
    t << "\n";
  }
  auto row = [&](const std::string& label, const std::string& value) {
    std::snprintf(buf, sizeof buf, "  %-46s %s\n", label.c_str(), value.c_str());
    t << buf;
  };
  t << "messages\n";
  row("committed (outbox rows)", num(check.rows));
  row("rolled back on purpose", num(stats.rolled_back_messages));
  row("producer commits in doubt", num(stats.in_doubt_messages));
  row("received (distinct message ids)", num(check.received));
  row("deliveries (with broker redeliveries)", num(check.deliveries));
  t << "result\n";
  row("lost", num(check.lost));
  row("unexpected", num(check.unexpected));
  row("duplicates (extra copies / rows)", num(check.duplicates) + " / " + num(check.duplicated_rows));
  row("pending at the end", num(check.pending));
  row("scheduled rows (deliver_at) / published early", num(check.scheduled) + " / " + num(check.early));
  if (relays_)
    row("relay sessions (re)connected (logs)", num(relays_->count_log_lines("connected to PostgreSQL") +
                                                   relays_->count_log_lines("connected again to PostgreSQL")));
  for (const auto& s : check.samples) t << "  sample: " << s << "\n";
  for (const auto& f : failures) t << "FAILED: " << f << "\n";
  t << "took " << static_cast<int>(std::chrono::duration<double>(Clock::now() - t0_).count())
    << " s in all (cluster start, faults, drain, check)\n";
  t << "verdict: " << (failures.empty() ? "PASS" : "FAIL") << "\n";
  std::cout << t.str() << std::flush;
  if (failures.empty() && !options_.keep_servers) run_process({"/bin/rm", "-rf", log_dir_});
  if (!failures.empty() || options_.keep_servers) std::cout << "relay logs and configs kept in " << log_dir_ << "\n";
  return failures.empty() ? 0 : 1;
}

}  // namespace chaos
