#include "loop/reconnect_supervisor.h"

#include <spdlog/spdlog.h>

#include "loop/publish_hold.h"

namespace relay {

namespace {

RelaySettings transient_backoff() {
  auto s = environment_backoff();
  s.backoff_max_ms = static_cast<int>(ReconnectSupervisor::kTransientMax.count());
  return s;
}

}  // namespace

ReconnectSupervisor::ReconnectSupervisor() : backoff_(transient_backoff()), permanent_backoff_(environment_backoff()) {}

std::chrono::milliseconds ReconnectSupervisor::before_attempt(Clock::time_point now) {
  if (connected_at_ != Clock::time_point{} && now - connected_at_ < std::chrono::seconds(1))
    return backoff_.delay(++quick_losses_);
  quick_losses_ = 0;
  return std::chrono::milliseconds(0);
}

ReconnectSupervisor::Failed ReconnectSupervisor::failed(const std::string& error, Clock::time_point now,
                                                        bool permanent) {
  if (!outage_) outage_began_ = now;
  outage_ = true;
  Failed f;
  f.first_of_its_kind = outage_errors_.size() < kDistinctErrors && outage_errors_.insert(error).second;
  f.repeat_due = !f.first_of_its_kind && now - warned_at_ >= kRepeatEvery;
  if (f.first_of_its_kind || f.repeat_due) warned_at_ = now;
  ++attempt_;
  f.wait = permanent ? permanent_backoff_.delay(attempt_) : backoff_.delay(attempt_);
  f.outage_for = std::chrono::duration_cast<std::chrono::seconds>(now - outage_began_);
  return f;
}

std::string ReconnectSupervisor::connected(const std::string& endpoints, Clock::time_point now) {
  std::string line = outage_ ? "connected again to " + endpoints + " after " + std::to_string(attempt_) +
                                   " failed attempt(s)"
                             : "connected to " + endpoints;
  attempt_ = 0;
  outage_ = false;
  outage_errors_.clear();
  connected_at_ = now;
  return line;
}

ReconnectSupervisor::Failed report_connect_failure(ReconnectSupervisor& supervisor, RelayMetrics& metrics,
                                                   ConnectTarget target, const std::string& error,
                                                   const ConnectFailure& kind,
                                                   ReconnectSupervisor::Clock::time_point now) {
  const auto what = describe_connect_failure(target, error, kind);
  metrics.connect_failed(target_label(target), kind.cause, what);
  const auto failed = supervisor.failed(what, now, kind.permanent);
  if (failed.first_of_its_kind) spdlog::warn("cannot connect, will retry with backoff: {}", what);
  else if (failed.repeat_due)
    spdlog::warn("still cannot connect after {} attempt(s) in {} s: {}", supervisor.failed_attempts(),
                 failed.outage_for.count(), what);
  else spdlog::debug("still cannot connect: {}", what);
  return failed;
}

}  // namespace relay
