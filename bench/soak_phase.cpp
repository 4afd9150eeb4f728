#include "soak_phase.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <unordered_map>

#include "disk_probe.h"
#include "number_text.h"
#include "outbox/pqxx_compat.h"
#include "process_cpu.h"
#include "relay_runner.h"
#include "soak_report.h"
#include "steady_load.h"

namespace bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr long kOrderedKeys = 1000;
// Retention runs this often, so the table's size oscillates by seconds of traffic
// above the kept window rather than by the default 5 minutes.
constexpr int kRetentionIntervalS = 10;

std::int64_t now_us() { return unix_us(std::chrono::system_clock::now()); }

// Latencies of the messages in flight, without keeping every message of an hour:
// an id stays from its commit to its receipt (and, when the table keeps rows, to
// the read of its published_at).
class LatencyBook {
 public:
  explicit LatencyBook(bool confirms) : confirms_(confirms) {}

  void committed(const std::vector<std::string>& ids, std::int64_t commit_us) {
    std::lock_guard<std::mutex> lock(mutex_);
    committed_ += static_cast<long>(ids.size());
    for (const auto& id : ids) {
      // The consumer may see a message before its producer's thread gets here.
      if (auto early = early_.find(id); early != early_.end()) {
        receipt(id, commit_us, early->second);
        early_.erase(early);
      } else {
        in_flight_.emplace(id, commit_us);
      }
    }
  }

  void received(const Delivery& d) {
    const std::int64_t at = unix_us(d.received);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_flight_.find(d.message_id);
    if (it == in_flight_.end()) {
      early_.emplace(d.message_id, at);  // early, or a redelivery (counted at the end)
      return;
    }
    receipt(it->first, it->second, at);
    in_flight_.erase(it);
  }

  // Received messages whose published_at is still to read: {id, commit us, receipt us}.
  struct Awaiting {
    std::string id;
    std::int64_t commit_us, received_us;
  };
  std::vector<Awaiting> take_awaiting(std::size_t most) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t n = std::min(most, awaiting_.size());
    std::vector<Awaiting> out(std::make_move_iterator(awaiting_.begin()),
                              std::make_move_iterator(awaiting_.begin() + static_cast<long>(n)));
    awaiting_.erase(awaiting_.begin(), awaiting_.begin() + static_cast<long>(n));
    return out;
  }
  void give_back(std::vector<Awaiting> rest) {
    std::lock_guard<std::mutex> lock(mutex_);
    awaiting_.insert(awaiting_.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  }
  void confirmed(double ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++confirmed_;
    confirm_ms_.push_back(ms);
  }
  void confirm_lost() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++confirm_lost_;
  }

  // This interval's latencies (the book starts the next) and the totals so far.
  struct Interval {
    std::vector<double> receipt_ms, confirm_ms;
    long committed = 0, received = 0, confirmed = 0;
  };
  Interval take_interval() {
    std::lock_guard<std::mutex> lock(mutex_);
    Interval i;
    i.receipt_ms.swap(receipt_ms_);
    i.confirm_ms.swap(confirm_ms_);
    i.committed = committed_;
    i.received = received_;
    i.confirmed = confirmed_;
    return i;
  }
  long committed_total() {
    std::lock_guard<std::mutex> lock(mutex_);
    return committed_;
  }
  long received_total() {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }
  bool confirms_settled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return awaiting_.empty();
  }
  // Deliveries of no message committed in this mode (redeliveries), and confirms
  // never read (a row gone before its published_at was read).
  std::size_t unmatched() {
    std::lock_guard<std::mutex> lock(mutex_);
    return early_.size();
  }
  long confirms_lost() {
    std::lock_guard<std::mutex> lock(mutex_);
    return confirm_lost_;
  }

 private:
  void receipt(const std::string& id, std::int64_t commit_us, std::int64_t at) {
    ++received_;
    receipt_ms_.push_back(static_cast<double>(at - commit_us) / 1000.0);
    if (confirms_) awaiting_.push_back({id, commit_us, at});
  }
  const bool confirms_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::int64_t> in_flight_, early_;
  std::vector<Awaiting> awaiting_;
  std::vector<double> receipt_ms_, confirm_ms_;
  long committed_ = 0, received_ = 0, confirmed_ = 0, confirm_lost_ = 0;
};

// Reads published_at of the received messages by message_id (the unique index), on
// a session of its own, every 200 ms: the relay records its ack time there
// (clock_timestamp() in its mark), the same clock as the producers' commit times.
class ConfirmReader {
 public:
  ConfirmReader(BenchEnv& env, LatencyBook& book, const std::string& application)
      : conn_(env.dsn_for(application)), book_(book), table_("\"" + env.schema() + "\".outbox") {
    thread_ = std::thread([this] { loop(); });
  }
  ~ConfirmReader() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  pid_t backend_pid() const { return backend_pid_; }
  void check() const {
    if (failed_) throw BenchError("soak: reading published_at failed: " + error_);
  }

 private:
  void loop() {
    try {
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        pass();
      }
      pass();  // the last receipts
    } catch (const std::exception& e) {
      error_ = e.what();
      failed_ = true;
    }
  }
  void pass() {
    auto batch = book_.take_awaiting(20000);
    if (batch.empty()) return;
    std::string ids = "{";
    for (const auto& a : batch) ids += (ids.size() > 1 ? "," : "") + a.id;
    ids += "}";
    std::unordered_map<std::string, std::int64_t> published;
    pqxx::nontransaction tx(conn_);
    for (const auto& r : outbox::pgx::exec_params(tx,
                                                  "SELECT message_id::text, (extract(epoch from published_at) * "
                                                  "1000000)::bigint FROM " +
                                                      table_ +
                                                      " WHERE message_id = ANY($1::uuid[]) "
                                                      "AND published_at IS NOT NULL",
                                                  ids))
      published.emplace(r[0].as<std::string>(), r[1].as<std::int64_t>());
    std::vector<LatencyBook::Awaiting> rest;
    const std::int64_t now = now_us();
    for (auto& a : batch) {
      if (auto it = published.find(a.id); it != published.end())
        book_.confirmed(static_cast<double>(it->second - a.commit_us) / 1000.0);
      else if (now - a.received_us > 30'000'000)  // its mark long committed: the row is gone
        book_.confirm_lost();
      else rest.push_back(std::move(a));  // received before the relay's mark committed
    }
    book_.give_back(std::move(rest));
  }

  pqxx::connection conn_;
  pid_t backend_pid_ = conn_.backendpid();
  LatencyBook& book_;
  std::string table_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::string error_;
};

// The relay settings of a mode, after the run's own (--relay-setting).
std::vector<std::string> mode_settings(const std::string& mode, const BenchOptions& o) {
  const std::vector<std::string> retention = {"retention.enabled=true",
                                              "retention.keep=" + std::to_string(o.soak_retention_minutes) + "m",
                                              "retention.interval_s=" + std::to_string(kRetentionIntervalS)};
  std::vector<std::string> s;
  if (mode == "delete") return {"on_publish=delete"};
  s = {"on_publish=mark"};
  if (mode == "ordered") s.push_back("ordering=per_key");
  s.insert(s.end(), retention.begin(), retention.end());
  return s;
}

// CPU and WAL readings at a sample boundary.
struct CpuReading {
  Clock::time_point at = Clock::now();
  std::optional<double> relay, broker, machine, server, own;
  double relay_pg = 0;
  WalState wal;
};

// The interval's WAL figures from two readings.
void add_wal(SoakSample& s, const WalState& a, const WalState& b, double secs) {
  if (!a.known || !b.known || secs <= 0) return;
  if (s.received > 0) {
    s.wal_kib_per_msg = (b.bytes - a.bytes) / 1024.0 / static_cast<double>(s.received);
    s.wal_fpi_per_msg = (b.fpi - a.fpi) / static_cast<double>(s.received);
  }
  s.wal_syncs_per_s = (b.syncs - a.syncs) / secs;
  // No time while the server does not track it (track_wal_io_timing off).
  if (b.syncs > a.syncs && b.sync_ms > a.sync_ms)
    s.wal_sync_us = (b.sync_ms - a.sync_ms) * 1000.0 / (b.syncs - a.syncs);
  s.checkpoints = b.checkpoints - a.checkpoints;
}

double per_msg(const std::optional<double>& a, const std::optional<double>& b, long msgs) {
  return a && b && msgs > 0 ? (*b - *a) * 1e6 / static_cast<double>(msgs) : -1;
}

json run_mode(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec, const std::string& mode, SoakCsv& csv,
              DiskProbe* disk) {
  env.reset();
  auto settings = spec.settings;
  const auto extra = mode_settings(mode, o);
  settings.insert(settings.end(), extra.begin(), extra.end());
  RelayRunner relay(spec.binary, relay_yaml(env.schema(), spec.batch_size, settings), false);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // connect

  const bool confirms = mode != "delete";  // delete mode leaves no row to read the ack time from
  LatencyBook book(confirms);
  const std::string producer_app = "outbox-bench-producer-" + env.schema();
  BackendCpu relay_pg(env.admin(), env.relay_application_name());
  const auto plan = plan_steady(o.soak_rate, 0);
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int p = 0; p < plan.producers; ++p)
    conns.push_back(std::make_unique<pqxx::connection>(env.dsn_for(producer_app)));
  const pid_t admin_pid =
      outbox::pgx::exec1(pqxx::nontransaction(env.admin()), "SELECT pg_backend_pid()")[0].as<pid_t>();
  const pid_t postmaster = parent_pid(admin_pid).value_or(0);
  const auto broker = broker_pid();
  const double total_s = o.soak_minutes * 60;

  DeliveryStream consumer(env, [&](Delivery&& d) { book.received(d); });
  std::unique_ptr<ConfirmReader> reader;
  if (confirms) reader = std::make_unique<ConfirmReader>(env, book, "outbox-bench-probe-" + env.schema());
  auto read_cpu = [&] {
    CpuReading c;
    relay_pg.sample();
    c.relay_pg = relay_pg.total_seconds();
    c.relay = process_cpu_seconds(relay.pid());
    if (broker) c.broker = process_cpu_seconds(*broker);
    c.machine = machine_busy_seconds();
    if (postmaster > 1) c.server = process_tree_cpu_seconds(postmaster);
    // The bench's own sessions (this sampling, the published_at reads) are not the relay's cost.
    c.own = process_cpu_seconds(admin_pid).value_or(0) +
            (reader ? process_cpu_seconds(reader->backend_pid()).value_or(0) : 0.0);
    c.wal = read_wal_state(env.admin());
    return c;
  };

  const auto length =
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(total_s));
  const auto payload = BenchEnv::random_payload(o.message_bytes);
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::string error;
  std::vector<std::thread> producers;
  // Stops and joins the threads whatever happens below.
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{stop, producers};
  const auto t0 = Clock::now();
  CpuReading before = read_cpu();
  if (disk) disk->take();  // from the producers' start
  long long autovacuums_before = read_table_state(env.admin(), env.schema()).autovacuum_count;
  for (int p = 0; p < plan.producers; ++p)
    producers.emplace_back([&, p] {
      try {
        ProducerRun run;
        run.tx_per_second = plan.tx_rate / plan.producers;
        run.per_tx = plan.per_tx;
        run.length = length;
        run.phase = static_cast<double>(p) / plan.producers;
        run.keys = mode == "ordered" ? kOrderedKeys : 0;
        run.key_offset = p * 7919L;  // producers start on different keys
        produce_steady(
            env, *conns[static_cast<std::size_t>(p)], run, payload,
            [&](const std::vector<std::string>& ids, std::int64_t at) { book.committed(ids, at); }, &stop);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        error = e.what();
        stop = true;
      }
    });

  auto check_running = [&] {
    if (auto u = relay.wait_for(std::chrono::milliseconds(0)))
      throw BenchError("soak " + mode + ": the relay exited " + std::to_string(u->exit_code) + "; log tail:\n" +
                       relay.log_tail());
    consumer.check();
    if (reader) reader->check();
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error.empty()) throw BenchError("soak " + mode + ": producer: " + error);
  };
  const int count = static_cast<int>(std::ceil(total_s / o.soak_sample_seconds - 1e-9));
  std::vector<SoakSample> samples;
  json rows = json::array();
  for (int k = 1; k <= count; ++k) {
    const double end_s = std::min(total_s, k * o.soak_sample_seconds);
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(end_s));
    while (Clock::now() < end) {
      check_running();
      std::this_thread::sleep_until(std::min(end, Clock::now() + std::chrono::milliseconds(250)));
    }
    const CpuReading after = read_cpu();
    auto interval = book.take_interval();
    SoakSample s;
    s.index = k;
    s.start_s = std::chrono::duration<double>(before.at - t0).count();
    s.end_s = std::chrono::duration<double>(after.at - t0).count();
    s.committed_total = interval.committed;
    s.received_total = interval.received;
    s.confirmed_total = interval.confirmed;
    s.received = static_cast<long>(interval.receipt_ms.size());
    s.receipt_ms = percentiles(std::move(interval.receipt_ms));
    if (confirms) s.confirm_ms = percentiles(std::move(interval.confirm_ms));
    s.relay_cpu_us = per_msg(before.relay, after.relay, s.received);
    s.relay_pg_cpu_us = s.received > 0 ? (after.relay_pg - before.relay_pg) * 1e6 / static_cast<double>(s.received)
                                       : -1;
    if (before.server && after.server)
      s.pg_server_cpu_us = per_msg(std::optional<double>(*before.server - *before.own),
                                   std::optional<double>(*after.server - *after.own), s.received);
    s.broker_cpu_us = per_msg(before.broker, after.broker, s.received);
    const double secs = std::chrono::duration<double>(after.at - before.at).count();
    if (before.machine && after.machine && secs > 0) s.machine_cores = (*after.machine - *before.machine) / secs;
    add_wal(s, before.wal, after.wal, secs);
    if (disk) s.disk_flush_us = percentiles(disk->take());
    s.relay_rss_mib = process_rss_mib(relay.pid()).value_or(-1);
    s.table = read_table_state(env.admin(), env.schema());
    s.autovacuums = s.table.autovacuum_count - autovacuums_before;
    autovacuums_before = s.table.autovacuum_count;
    s.queue_depth = env.queue_depth();
    std::cout << show(mode, s, count) << std::flush;
    csv.write(mode, s);
    rows.push_back(to_json(s));
    samples.push_back(std::move(s));
    before = after;
  }

  // The end of the mode: every committed message received, the relay stops cleanly.
  stop = true;
  for (auto& t : producers) t.join();
  check_running();
  const long committed = book.committed_total();
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (book.received_total() < committed && Clock::now() < until) {
    check_running();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (reader) {
    while (!book.confirms_settled() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reader->stop();
    reader->check();
  }
  consumer.stop();
  consumer.check();
  const long received = book.received_total();
  if (received < committed)
    throw BenchError("soak " + mode + ": " + std::to_string(committed) + " messages committed, " +
                     std::to_string(received) + " received 60 s after the producers stopped; relay log tail:\n" +
                     relay.log_tail());
  relay.stop();
  auto usage = relay.wait_for(std::chrono::seconds(30));
  if (!usage || usage->exit_code != 0)
    throw BenchError("soak " + mode + ": the relay did not stop cleanly; log tail:\n" + relay.log_tail());
  const double produced_s = samples.empty() ? total_s : samples.back().end_s;
  std::cout << "soak " << mode << ": " << committed << " committed, " << received << " received ("
            << fmt(static_cast<double>(committed) / produced_s) << " msg/s), " << book.unmatched()
            << " deliveries matching no commit (redeliveries)"
            << (confirms ? ", " + std::to_string(book.confirms_lost()) + " ack times not read" : std::string()) << "\n";
  json out{{"mode", mode},
           {"relay_settings", extra},
           {"committed", committed},
           {"received", received},
           {"achieved_rate", static_cast<double>(committed) / produced_s},
           {"producers", plan.producers},
           {"messages_per_transaction", plan.per_tx},
           {"relay_peak_rss_mib", usage->peak_rss_mib},
           {"samples", rows}};
  out["comparison"] = compare_windows(mode, samples, total_s);
  env.reset();
  return out;
}

}  // namespace

json run_soak_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec) {
  std::string path = o.soak_csv;
  if (path.empty()) {
    const auto& j = o.json_path;
    path = j.empty() ? "outbox-bench-soak.csv"
                     : (j.size() > 5 && j.compare(j.size() - 5, 5, ".json") == 0 ? j.substr(0, j.size() - 5) : j) +
                           ".soak.csv";
  }
  SoakCsv csv(path);
  // The disk probe's directory: the option, else the local servers' (deploy/local/servers.sh).
  std::string disk_dir = o.soak_disk_dir;
  if (disk_dir.empty()) {
    const char* local = std::getenv("OUTBOX_LOCAL_DIR");
    disk_dir = local && *local ? local : "off";
  }
  std::unique_ptr<DiskProbe> disk;
  if (disk_dir != "off") disk = std::make_unique<DiskProbe>(disk_dir, "--soak-disk-dir");
  std::cout << "soak: " << o.soak_rate << " msg/s for " << fmt(o.soak_minutes, 1) << " min per mode ("
            << o.soak_modes.size() << " modes), a sample every " << fmt(o.soak_sample_seconds, 1)
            << " s, retention keep " << o.soak_retention_minutes << " min every " << kRetentionIntervalS
            << " s (mark, ordered); rows in " << csv.path() << "; disk probe "
            << (disk ? "in " + disk_dir : std::string("off (--soak-disk-dir)")) << "\n"
            << std::flush;
  json modes = json::array();
  for (const auto& mode : o.soak_modes) modes.push_back(run_mode(env, o, spec, mode, csv, disk.get()));
  return json{{"rate", o.soak_rate},
              {"minutes_per_mode", o.soak_minutes},
              {"sample_seconds", o.soak_sample_seconds},
              {"retention_keep_minutes", o.soak_retention_minutes},
              {"retention_interval_s", kRetentionIntervalS},
              {"ordered_keys", kOrderedKeys},
              {"csv", csv.path()},
              {"disk_probe_dir", disk ? json(disk_dir) : json(nullptr)},
              {"modes", modes}};
}

}  // namespace bench
