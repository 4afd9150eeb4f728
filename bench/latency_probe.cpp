// Latency at a steady producer rate: enqueue commit -> broker confirm (as recorded
// by the relay in published_at) and -> consumer receipt.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <pqxx/pqxx>
#include <thread>
#include <unordered_map>

#include "measurements.h"
#include "process_cpu.h"
#include "steady_load.h"

namespace bench {
namespace {

using SysClock = std::chrono::system_clock;

// Keeps every delivery of the run's queue until taken.
class Receiver {
 public:
  explicit Receiver(BenchEnv& env)
      : stream_(env, [this](Delivery&& d) {
          std::lock_guard<std::mutex> lock(mutex_);
          got_.push_back(std::move(d));
        }) {}
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return got_.size();
  }
  std::vector<Delivery> take() {
    stream_.stop();
    if (stream_.failed()) throw BenchError("latency consumer failed: " + stream_.error());
    return std::move(got_);
  }

 private:
  std::mutex mutex_;
  std::vector<Delivery> got_;
  DeliveryStream stream_;  // last: its thread stops before the vector goes
};

struct Sent {
  std::string message_id;
  std::int64_t commit_us;
};

// One producer connection committing `per_tx` messages per transaction on a fixed
// schedule (open loop: a late commit does not delay the ones after it).
std::vector<Sent> produce(BenchEnv& env, pqxx::connection& conn, double tx_per_second, int per_tx,
                          SysClock::duration length, double phase, const std::string& payload) {
  std::vector<Sent> sent;
  ProducerRun run;
  run.tx_per_second = tx_per_second;
  run.per_tx = per_tx;
  run.length = length;
  run.phase = phase;
  produce_steady(env, conn, run, payload, [&](const std::vector<std::string>& ids, std::int64_t committed) {
    for (const auto& id : ids) sent.push_back({id, committed});
  });
  return sent;
}

template <class Pred>
void wait_until(Pred done, std::chrono::seconds limit, const std::string& what) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) throw BenchError("latency: " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// CPU seconds of the processes a latency step splits its CPU between.
struct CpuClock {
  explicit CpuClock(const std::vector<pid_t>& relay_pids)
      : at(std::chrono::steady_clock::now()),
        machine(machine_busy_seconds()),
        broker(broker_pid() ? process_cpu_seconds(*broker_pid()) : std::nullopt),
        self(process_cpu_seconds(getpid())) {
    for (pid_t pid : relay_pids) relays.push_back(process_cpu_seconds(pid));
  }
  std::chrono::steady_clock::time_point at;
  std::optional<double> machine, broker, self;
  std::vector<std::optional<double>> relays;
};

double cores(const std::optional<double>& from, const std::optional<double>& to, double seconds) {
  return from && to && seconds > 0 ? (*to - *from) / seconds : -1;
}

}  // namespace

LatencyResult measure_latency(BenchEnv& env, long rate, double seconds, int bytes, int per_tx,
                              const std::vector<pid_t>& relay_pids) {
  Receiver receiver(env);
  const SteadyPlan plan = plan_steady(rate, per_tx);
  per_tx = plan.per_tx;
  const double tx_rate = plan.tx_rate;
  const int producers = plan.producers;
  const auto length = std::chrono::duration_cast<SysClock::duration>(std::chrono::duration<double>(seconds));
  const std::string payload = BenchEnv::random_payload(bytes);
  std::vector<std::vector<Sent>> per_thread(static_cast<std::size_t>(producers));
  // Named sessions, open until their CPU is read (a backend's CPU goes with it).
  const std::string producer_app = "outbox-bench-producer-" + env.schema();
  BackendCpu producers_pg(env.admin(), producer_app), relay_pg(env.admin(), env.relay_application_name());
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int p = 0; p < producers; ++p) conns.push_back(std::make_unique<pqxx::connection>(env.dsn_for(producer_app)));
  const CpuClock cpu_before(relay_pids);
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::string error;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      try {
        per_thread[static_cast<std::size_t>(p)] = produce(env, *conns[static_cast<std::size_t>(p)], tx_rate / producers,
                                                          per_tx, length, static_cast<double>(p) / producers, payload);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (!error.empty()) throw BenchError("latency producer: " + error);
  const CpuClock cpu_after(relay_pids);
  producers_pg.sample();
  relay_pg.sample();
  conns.clear();

  std::unordered_map<std::string, std::int64_t> commit_us;
  for (const auto& v : per_thread)
    for (const auto& s : v) commit_us.emplace(s.message_id, s.commit_us);
  wait_until([&] { return env.pending_rows() == 0; }, std::chrono::seconds(60),
             "rows still pending 60 s after the producers stopped");
  wait_until([&] { return receiver.count() >= commit_us.size(); }, std::chrono::seconds(30),
             "messages missing at the consumer 30 s after the last was published");
  auto deliveries = receiver.take();

  LatencyResult result;
  result.rate = rate;
  // Over the time the commits really took: producers that cannot keep the schedule
  // (each commit waits for its WAL flush) commit late, and the step lasts longer.
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& [id, us] : commit_us) {
    first = std::min(first, us);
    last = std::max(last, us);
  }
  const double took = std::max(seconds, (last - first) / 1e6);
  result.achieved_rate = static_cast<double>(commit_us.size()) / took;
  result.producers = producers;
  const double step = std::chrono::duration<double>(cpu_after.at - cpu_before.at).count();
  result.cpu.machine = cores(cpu_before.machine, cpu_after.machine, step);
  result.cpu.producers_pg = producers_pg.total_seconds() / step;
  result.cpu.relay_pg = relay_pg.total_seconds() / step;
  result.cpu.broker = cores(cpu_before.broker, cpu_after.broker, step);
  for (std::size_t i = 0; i < relay_pids.size(); ++i) {
    const double c = cores(cpu_before.relays[i], cpu_after.relays[i], step);
    if (c < 0) {
      result.cpu.per_relay.clear();
      break;
    }
    result.cpu.per_relay.push_back(c);
  }
  if (!result.cpu.per_relay.empty())
    result.cpu.relay = std::accumulate(result.cpu.per_relay.begin(), result.cpu.per_relay.end(), 0.0);
  if (result.cpu.per_relay.size() < 2) result.cpu.per_relay.clear();
  result.cpu.bench = cores(cpu_before.self, cpu_after.self, step);
  result.per_transaction = per_tx;
  std::vector<double> to_confirm, to_receipt;
  std::vector<std::vector<double>> by_second(static_cast<std::size_t>((last - first) / 1000000 + 1));
  pqxx::nontransaction tx(env.admin());
  for (const auto& r : tx.exec("SELECT message_id::text, (extract(epoch from published_at) * 1000000)::bigint "
                               "FROM \"" +
                               env.schema() + "\".outbox WHERE published_at IS NOT NULL")) {
    auto it = commit_us.find(r[0].c_str());
    if (it == commit_us.end()) continue;
    to_confirm.push_back((r[1].as<std::int64_t>() - it->second) / 1000.0);
    by_second[static_cast<std::size_t>((it->second - first) / 1000000)].push_back(to_confirm.back());
  }
  std::unordered_map<std::string, bool> seen;
  for (const auto& d : deliveries) {
    auto it = commit_us.find(d.message_id);
    if (it == commit_us.end() || seen[d.message_id]) continue;  // first delivery only
    seen[d.message_id] = true;
    to_receipt.push_back((unix_us(d.received) - it->second) / 1000.0);
  }
  if (to_confirm.size() != commit_us.size() || to_receipt.size() != commit_us.size())
    throw BenchError("latency: " + std::to_string(commit_us.size()) + " enqueued, " +
                     std::to_string(to_confirm.size()) + " published, " + std::to_string(to_receipt.size()) +
                     " received");
  for (auto& second : by_second)
    if (!second.empty()) result.p99_by_second_ms.push_back(percentiles(std::move(second)).p99);
  result.to_confirm_ms = percentiles(std::move(to_confirm));
  result.to_receipt_ms = percentiles(std::move(to_receipt));
  return result;
}

}  // namespace bench
