#include "loop/wake_coordinator.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "outbox/one_line.h"

namespace relay {
namespace {

using std::chrono::milliseconds;

}  // namespace

WakeCoordinator::WakeCoordinator(const RelaySettings& relay, BrokerLink& amqp, WakeListener& listener,
                                 RelayMetrics& metrics, const LoopClock& clock, const std::atomic<bool>& stop,
                                 std::function<void()> tick)
    : relay_(relay),
      amqp_(amqp),
      listener_(listener),
      metrics_(metrics),
      clock_(clock),
      stop_(stop),
      tick_(std::move(tick)) {}

bool WakeCoordinator::sleep(Clock::time_point wake_by, bool per_key) {
  using Arm = WakeListener::Arm;
  auto poll = milliseconds(relay_.poll_interval_ms);
  bool fallback_poll = false;
  arm_policy_.went_idle();
  if (relay_.listen && listener_ready()) {
    try {
      if (!listener_.armed()) {
        arm_state_ = listener_.arm();
        if (arm_state_ == Arm::kArmed) {
          answer_for_holder_ = false;  // it is the holder now
          return true;                 // claim once more, a probe first
        }
      }
      // Armed, or another idle relay is: every insert notifies. Otherwise a
      // producer transaction that did not notify is open: poll until it ends.
      if (listener_.armed() || arm_state_ == Arm::kOtherRelay) {
        poll = milliseconds(relay_.listen_poll_interval_ms);
        fallback_poll = true;
      }
    } catch (const std::exception& e) {
      spdlog::warn("PostgreSQL listener session failed, polling until it is back: {}", outbox::one_line(e.what()));
      listener_.disconnect();
    }
  }
  const auto until = std::min(clock_.now() + poll, wake_by);
  // Another idle relay holds the lock and answers the producers' notifications;
  // waking for them too would be N relays claiming for one row. With per_key lanes
  // the row's lane may be this relay's, so it stays woken.
  const bool bystander = fallback_poll && !listener_.armed() && !per_key;
  metrics_.set_listen_role(listener_.armed()    ? ListenRole::kHolder
                           : !bystander         ? ListenRole::kNone
                           : answer_for_holder_ ? ListenRole::kAnswering
                                                : ListenRole::kBystander);
  const bool notified = wait(until, bystander && !answer_for_holder_);
  polled_as_bystander_ = bystander && !notified;
  woke_on_notification_ = notified;
  return fallback_poll && !notified;  // a notification means rows: claim at once
}

void WakeCoordinator::judge_holder(const std::vector<ClaimedRow>& rows) {
  const bool polled = std::exchange(polled_as_bystander_, false);
  const bool notified = std::exchange(woke_on_notification_, false);
  if (polled && !answer_for_holder_ &&
      std::any_of(rows.begin(), rows.end(), [](const ClaimedRow& r) { return r.attempts == 0; })) {
    answer_for_holder_ = true;
    const auto& holder = listener_.lock_holder();
    const bool relay = holder.rfind("another relay", 0) == 0;
    spdlog::warn(
        "{} new row(s) were due at the fallback poll though {} holds the waiting lock, so producers' "
        "notifications go to it: {}; answering them too until it does",
        rows.size(), holder.empty() ? "another session" : holder,
        relay ? "it does not answer (a session left by a partition, a hung process)"
              : "it is no relay and will not answer (a lock taken by hand: pg_terminate_backend frees it)");
  } else if (notified && rows.empty() && answer_for_holder_) {
    answer_for_holder_ = false;
    spdlog::info("the relay holding the waiting lock answers producers again: leaving their notifications to it");
  }
}

void WakeCoordinator::poll_busy(Clock::time_point wake_by) {
  metrics_.set_listen_role(ListenRole::kPolling);
  polled_as_bystander_ = woke_on_notification_ = false;
  tick_();
  read_listener();  // another holder's producers': this relay claims anyway
  drain_broker_events();
  const auto now = clock_.now();
  if (wake_by > now) clock_.sleep_for(std::min<Clock::duration>(arm_policy_.busy_poll(), wake_by - now));
}

std::optional<WakeListener::Wake> WakeCoordinator::read_listener() {
  try {
    return listener_.take_notifications();
  } catch (const std::exception& e) {
    spdlog::warn("PostgreSQL listener session lost, polling until it is back: {}", outbox::one_line(e.what()));
    listener_.disconnect();
    return std::nullopt;
  }
}

bool WakeCoordinator::listener_ready() {
  if (listener_.connected()) return true;
  try {
    listener_.connect();
    if (listener_failed_) spdlog::info("PostgreSQL listener session is back: waking on notifications");
    listener_failed_ = false;
    return true;
  } catch (const std::exception& e) {
    if (!listener_failed_)
      spdlog::warn("cannot LISTEN, polling every relay.poll_interval_ms instead: {}", outbox::one_line(e.what()));
    listener_failed_ = true;
    return false;
  }
}

bool WakeCoordinator::wait(Clock::time_point until, bool handover_only) {
  while (!stop_) {
    tick_();
    const auto wake = read_listener();
    if (!wake) {
      metrics_.set_listen_role(ListenRole::kNone);
      // The server may be gone with it (a failover): wake now, so the claim finds out
      // and the loop reconnects, instead of sleeping out the fallback poll.
      return true;
    }
    if (wake->handover || (wake->producer && !handover_only)) return true;
    auto left = std::chrono::ceil<milliseconds>(until - clock_.now());
    if (left <= milliseconds(0)) return false;
    pollfd fds[2];
    nfds_t n = 0;
    if (amqp_.connected()) fds[n++] = pollfd{amqp_.socket(), POLLIN, 0};
    if (listener_.connected()) fds[n++] = pollfd{listener_.socket(), POLLIN, 0};
    if (!amqp_.has_buffered_data()) clock_.wait_readable(fds, n, std::min(left, milliseconds(100)));
    drain_broker_events();
    if (!amqp_.connected()) {  // lost while idle: wake, so the loop reconnects at once
      give_back();             // it cannot publish what it would be woken for
      return true;
    }
  }
  return false;
}

// Reading (even nothing) lets rabbitmq-c send and check heartbeats. Nothing is in
// flight while the relay waits: an event can only be a close.
void WakeCoordinator::drain_broker_events() {
  while (amqp_.connected()) {
    auto ev = amqp_.next_event(milliseconds(0));
    if (!ev) break;
    if (ev->kind == BrokerEvent::Kind::kConnectionClosed) spdlog::warn("AMQP {}", ev->reason);
  }
}

void WakeCoordinator::give_back() {
  if (!listener_.armed()) return;
  metrics_.set_listen_role(ListenRole::kNone);
  try {
    listener_.disarm(WakeListener::Release::kHandOver);
  } catch (const std::exception& e) {
    spdlog::warn("PostgreSQL listener session failed, polling until it is back: {}", outbox::one_line(e.what()));
    listener_.disconnect();
  }
}

void WakeCoordinator::pause(milliseconds total) {
  const auto until = clock_.now() + total;
  while (!stop_) {
    auto left = std::chrono::duration_cast<milliseconds>(until - clock_.now());
    if (left <= milliseconds(0)) return;
    auto slice = std::min(left, milliseconds(100));
    tick_();
    if (amqp_.connected()) {
      auto ev = amqp_.next_event(slice);
      if (ev && ev->kind == BrokerEvent::Kind::kConnectionClosed) spdlog::warn("AMQP {}", ev->reason);
    } else {
      clock_.sleep_for(slice);
    }
  }
}

}  // namespace relay
