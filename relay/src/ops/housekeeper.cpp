#include "ops/housekeeper.h"

#include <spdlog/spdlog.h>

#include "ops/outbox_cleaner.h"
#include "outbox/duration.h"
#include "outbox/one_line.h"
#include "pg/outbox_store.h"

namespace relay {

Housekeeper::Housekeeper(const RelayConfig& config, RelayMetrics& metrics) : config_(config), metrics_(metrics) {}

Housekeeper::~Housekeeper() { stop(); }

bool Housekeeper::start() {
  if (config_.http.listen.empty() && !config_.retention.enabled) return false;
  thread_ = std::thread([this] { run(); });
  return true;
}

void Housekeeper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Housekeeper::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

bool Housekeeper::sleep_until(Clock::time_point until) {
  std::unique_lock lock(mu_);
  return !cv_.wait_until(lock, until, [this] { return stopping_; });
}

void Housekeeper::run() {
  const bool stats = !config_.http.listen.empty();
  const bool retention = config_.retention.enabled;
  const auto stats_every = std::chrono::seconds(config_.http.stats_interval_s);
  const auto retention_every = std::chrono::seconds(config_.retention.interval_s);
  OutboxStore store(config_.postgres);
  std::string last_error;
  auto next_stats = Clock::now();
  // The first retention run waits one interval: a relay fleet restarting at once
  // should publish first.
  auto next_retention = Clock::now() + std::min(retention_every, std::chrono::seconds(60));
  while (!stopping()) {
    const auto now = Clock::now();
    try {
      if (!store.connected()) store.connect();
      if (stats && now >= next_stats) {
        refresh_stats(store);
        next_stats = now + stats_every;
      }
      if (retention && now >= next_retention) {
        run_retention(store);
        next_retention = Clock::now() + retention_every;
      }
      last_error.clear();
    } catch (const std::exception& e) {
      auto error = outbox::one_line(e.what());
      if (error != last_error) spdlog::warn("housekeeping (stats, retention) failed, will retry: {}", error);
      last_error = error;
      store.disconnect();
      next_stats = now + stats_every;
      next_retention = std::max(next_retention, now + std::chrono::seconds(10));
    }
    auto wake = stats ? next_stats : next_retention;
    if (retention) wake = std::min(wake, next_retention);
    if (!sleep_until(wake)) break;
  }
}

void Housekeeper::refresh_stats(OutboxStore& store) {
  const auto s = store.stats();
  metrics_.set_backlog(s.pending, s.parked, s.oldest_pending_age_s);
  metrics_.set_scheduled(s.scheduled, s.next_scheduled_in_s);
}

void Housekeeper::run_retention(OutboxStore& store) {
  OutboxCleaner cleaner(store.session(), config_.postgres.schema);
  if (!cleaner.try_lock()) {
    spdlog::debug("retention: another relay holds the retention lock; skipped");
    return;
  }
  const auto t0 = Clock::now();
  std::int64_t deleted = 0;
  try {
    const auto keep = std::chrono::seconds(config_.retention.keep_s);
    const auto cutoff = cleaner.cutoff_for(keep);
    auto window_start = Clock::now();
    deleted = cleaner.run(
        cutoff, config_.retention.batch_size,
        [&](const OutboxCleaner::Window& w) {
          metrics_.retention_deleted(static_cast<std::size_t>(w.deleted),
                                     std::chrono::duration<double>(Clock::now() - window_start).count());
          if (config_.retention.pause_ms > 0)
            sleep_until(Clock::now() + std::chrono::milliseconds(config_.retention.pause_ms));
          window_start = Clock::now();
        },
        [&] { return !stopping(); });
    cleaner.unlock();
  } catch (...) {
    store.disconnect();  // releases the lock with the session
    throw;
  }
  if (deleted > 0)
    spdlog::info("retention: deleted {} rows published more than {} ago in {:.1f} s", deleted,
                 outbox::format_duration(std::chrono::seconds(config_.retention.keep_s)),
                 std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace relay
