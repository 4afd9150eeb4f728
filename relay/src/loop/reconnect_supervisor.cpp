#include "loop/reconnect_supervisor.h"

#include "loop/publish_hold.h"

namespace relay {

ReconnectSupervisor::ReconnectSupervisor() : backoff_(environment_backoff()) {}

std::chrono::milliseconds ReconnectSupervisor::before_attempt(Clock::time_point now) {
  if (connected_at_ != Clock::time_point{} && now - connected_at_ < std::chrono::seconds(1))
    return backoff_.delay(++quick_losses_);
  quick_losses_ = 0;
  return std::chrono::milliseconds(0);
}

ReconnectSupervisor::Failed ReconnectSupervisor::failed(const std::string& error) {
  outage_ = true;
  Failed f;
  f.first_of_its_kind = outage_errors_.size() < kDistinctErrors && outage_errors_.insert(error).second;
  f.wait = backoff_.delay(++attempt_);
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

}  // namespace relay
