#include "loop/reconnect_supervisor.h"

#include <spdlog/spdlog.h>

#include "loop/publish_hold.h"

namespace relay {

ReconnectSupervisor::ReconnectSupervisor() : backoff_(environment_backoff()) {}

std::chrono::milliseconds ReconnectSupervisor::before_attempt(Clock::time_point now) {
  if (connected_at_ != Clock::time_point{} && now - connected_at_ < std::chrono::seconds(1))
    return backoff_.delay(++quick_losses_);
  quick_losses_ = 0;
  return std::chrono::milliseconds(0);
}

ReconnectSupervisor::Failed ReconnectSupervisor::failed(const std::string& error, Clock::time_point now) {
  if (!outage_) outage_began_ = now;
  outage_ = true;
  Failed f;
  f.first_of_its_kind = outage_errors_.size() < kDistinctErrors && outage_errors_.insert(error).second;
  f.repeat_due = !f.first_of_its_kind && now - warned_at_ >= kRepeatEvery;
  if (f.first_of_its_kind || f.repeat_due) warned_at_ = now;
  f.wait = backoff_.delay(++attempt_);
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

void log_connect_failure(const ReconnectSupervisor::Failed& failed, int attempts, const std::string& what) {
  if (failed.first_of_its_kind) spdlog::warn("cannot connect, will retry with backoff: {}", what);
  else if (failed.repeat_due)
    spdlog::warn("still cannot connect after {} attempt(s) in {} s: {}", attempts, failed.outage_for.count(), what);
  else spdlog::debug("still cannot connect: {}", what);
}

}  // namespace relay
