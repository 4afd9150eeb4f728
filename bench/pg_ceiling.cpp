// The PostgreSQL ceiling: the relay's claim and mark statements with no broker.
#include <array>
#include <chrono>
#include <type_traits>

#include "measurements.h"
#include "pg/outbox_store.h"
#include "process_cpu.h"

namespace bench {
namespace {

// The backend's CPU time, split by statement: each statement is bracketed by two
// reads of its /proc/PID/schedstat (a backend off the CPU between statements has
// its figure up to date). Does nothing when that file cannot be read.
class BackendStatementCpu {
 public:
  enum Part { kClaim, kSettle, kCommit };
  explicit BackendStatementCpu(relay::PgSession& session) {
    pid_ = session.backend_pid();  // pg_backend_pid()
    measured_ = process_run_ns(pid_).has_value();
  }
  // Runs `f` and charges the backend's CPU meanwhile to `part`.
  template <class F>
  auto charge(Part part, F&& f) {
    const auto before = measured_ ? process_run_ns(pid_) : std::nullopt;
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      add(part, before);
    } else {
      auto result = f();
      add(part, before);
      return result;
    }
  }
  void report(long rows, PgStatementCpu& out) const {
    out.measured = measured_ && rows > 0;
    if (!out.measured) return;
    out.claim_us = ns_[kClaim] / 1e3 / static_cast<double>(rows);
    out.settle_us = ns_[kSettle] / 1e3 / static_cast<double>(rows);
    out.commit_us = ns_[kCommit] / 1e3 / static_cast<double>(rows);
  }

 private:
  void add(Part part, std::optional<std::int64_t> before) {
    if (!before) return;
    if (const auto after = process_run_ns(pid_)) ns_[part] += *after - *before;
  }

  pid_t pid_ = 0;
  bool measured_ = false;
  std::array<std::int64_t, 3> ns_{};
};

}  // namespace

double measure_pg_ceiling(BenchEnv& env, long rows, int batch, int bytes, PgSettle settle, PgStatementCpu* cpu) {
  env.fill(rows, bytes);
  relay::PostgresConfig config;
  config.dsn = env.pg_dsn();
  config.schema = env.schema();
  relay::StoreOptions options;
  options.delete_on_publish = settle == PgSettle::kDelete;  // the relay's own statements, both modes
  relay::OutboxStore store(config, options);
  store.connect();
  BackendStatementCpu backend(store.session());
  long claimed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::unique_ptr<relay::BatchTransaction> tx;
    auto batch_rows = backend.charge(BackendStatementCpu::kClaim, [&] {
      tx = std::make_unique<relay::BatchTransaction>(store.session());  // BEGIN goes with the claim
      return store.claim(*tx, batch);
    });
    if (batch_rows.empty()) break;
    std::vector<const relay::ClaimedRow*> acked;
    acked.reserve(batch_rows.size());
    for (const auto& r : batch_rows) acked.push_back(&r);
    backend.charge(BackendStatementCpu::kSettle, [&] { store.mark_published(*tx, acked); });
    backend.charge(BackendStatementCpu::kCommit, [&] { tx->commit(); });
    claimed += static_cast<long>(acked.size());
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (claimed != rows || env.pending_rows() != 0)
    throw BenchError("PG ceiling: claimed " + std::to_string(claimed) + " of " + std::to_string(rows) + " rows");
  if (cpu) backend.report(claimed, *cpu);
  env.reset();
  return static_cast<double>(claimed) / elapsed;
}

}  // namespace bench
