// RelayLoop, its idle side: waiting for work (LISTEN/NOTIFY with a fallback poll),
// rebalancing per_key lanes, and the periodic summary. The busy side (claim,
// publish, confirm, mark) is in relay_loop.cpp.
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>
#include <thread>
#include <utility>

#include "outbox/one_line.h"
#include "loop/relay_loop.h"

namespace relay {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Nothing in flight and the last claim found nothing. With relay.listen, arm the
// listener first; once armed, claim once more (every insert that did not notify
// has ended), then sleep until a notification, the fallback poll, this relay's own
// earliest retry, or stop.
void RelayLoop::sleep_until_work() {
  using Arm = NotifyListener::Arm;
  auto poll = milliseconds(config_.relay.poll_interval_ms);
  bool fallback_poll = false;
  arm_policy_.went_idle();
  if (config_.relay.listen && listener_ready()) {
    try {
      if (!listener_.armed()) {
        arm_state_ = listener_.arm();
        if (arm_state_ == Arm::kArmed) {
          answer_for_holder_ = false;  // it is the holder now
          last_claim_empty_ = false;
          probe_first_ = true;
          return;
        }
      }
      // Armed, or another idle relay is: every insert notifies. Otherwise a
      // producer transaction that did not notify is open: poll until it ends.
      if (listener_.armed() || arm_state_ == Arm::kOtherRelay) {
        poll = milliseconds(config_.relay.listen_poll_interval_ms);
        fallback_poll = true;
      }
    } catch (const std::exception& e) {
      spdlog::warn("PostgreSQL listener session failed, polling until it is back: {}", outbox::one_line(e.what()));
      listener_.disconnect();
    }
  }
  auto until = Clock::now() + poll;
  if (next_retry_at_ && *next_retry_at_ < until) until = *next_retry_at_;
  if (lanes_ && next_rebalance_ < until) until = std::max(next_rebalance_, Clock::now());
  // Another idle relay holds the lock and answers the producers' notifications;
  // waking for them too would be N relays claiming for one row. With per_key lanes
  // the row's lane may be this relay's, so it stays woken.
  const bool bystander = fallback_poll && !listener_.armed() && !lanes_;
  metrics_->set_listen_role(listener_.armed() ? ListenRole::kHolder
                            : !bystander       ? ListenRole::kNone
                            : answer_for_holder_ ? ListenRole::kAnswering
                                                 : ListenRole::kBystander);
  const bool notified = wait_for_work(until, bystander && !answer_for_holder_);
  if (next_retry_at_ && Clock::now() >= *next_retry_at_) next_retry_at_.reset();
  last_claim_empty_ = false;
  probe_first_ = fallback_poll && !notified;  // a notification means rows: claim at once
  polled_as_bystander_ = bystander && !notified;
  woke_on_notification_ = notified;
}

// A bystander's fallback poll that claims rows nobody attempted yet means the holder
// of the waiting lock left them (rows that waited up to listen_poll_interval_ms); a
// claim on a notification that finds nothing means the holder took them first.
void RelayLoop::judge_lock_holder(const std::vector<ClaimedRow>& rows) {
  const bool polled = std::exchange(polled_as_bystander_, false);
  const bool notified = std::exchange(woke_on_notification_, false);
  if (polled && !answer_for_holder_ &&
      std::any_of(rows.begin(), rows.end(), [](const ClaimedRow& r) { return r.attempts == 0; })) {
    answer_for_holder_ = true;
    spdlog::warn("{} new row(s) were due at the fallback poll though another relay holds the waiting lock and "
                 "should have been woken for them: it does not answer (a session left by a partition, a hung "
                 "process); answering producers' notifications too until it does", rows.size());
  } else if (notified && rows.empty() && answer_for_holder_) {
    answer_for_holder_ = false;
    spdlog::info("the relay holding the waiting lock answers producers again: leaving their notifications to it");
  }
}

// Recounts the live relays and takes or gives up lanes (logged when they move).
void RelayLoop::rebalance_lanes() {
  next_rebalance_ = Clock::now() + milliseconds(config_.relay.rebalance_interval_ms);
  if (!primary().connected() || !lanes_->joined()) return;
  try {
    auto change = lanes_->rebalance(primary().session());
    metrics_->set_lanes_owned(lanes_->owned().size());
    if (!change.taken.empty() || !change.released.empty())
      spdlog::info("lanes: own {} of {} ({} relays, fair share {}): took {}, gave up {}",
                   lanes_->owned().size(), lanes_->lanes(), change.members, change.fair_share,
                   change.taken.size(), change.released.size());
    if (!change.taken.empty()) last_claim_empty_ = false;  // new keys may have work
  } catch (const std::exception& e) {
    spdlog::warn("lane rebalance failed, reconnecting: {}", outbox::one_line(e.what()));
    primary().disconnect();
    lanes_->forget();
    metrics_->set_lanes_owned(0);
  }
}

// Connects the listener when needed; false (logged once) while it cannot.
bool RelayLoop::listener_ready() {
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

// Sleeps until `until`, waiting on both sockets: a notification on the listener's
// session ends the wait (true); broker frames and AMQP heartbeats are serviced.
bool RelayLoop::wait_for_work(Clock::time_point until, bool handover_only) {
  while (!stop_) {
    note_state();
    try {
      const auto wake = listener_.take_notifications();
      if (wake.handover || (wake.producer && !handover_only)) return true;
    } catch (const std::exception& e) {
      spdlog::warn("PostgreSQL listener session lost, polling until it is back: {}", outbox::one_line(e.what()));
      listener_.disconnect();
      metrics_->set_listen_role(ListenRole::kNone);
    }
    auto left = std::chrono::ceil<milliseconds>(until - Clock::now());
    if (left <= milliseconds(0)) return false;
    pollfd fds[2];
    nfds_t n = 0;
    if (amqp_.connected()) fds[n++] = pollfd{amqp_.socket(), POLLIN, 0};
    if (listener_.connected()) fds[n++] = pollfd{listener_.socket(), POLLIN, 0};
    const bool buffered = amqp_.has_buffered_data();
    if (!buffered) ::poll(fds, n, static_cast<int>(std::min(left, milliseconds(100)).count()));
    // Reading (even nothing) lets rabbitmq-c send and check heartbeats.
    while (amqp_.connected()) {
      auto ev = amqp_.next_event(milliseconds(0));
      if (!ev) break;
      if (ev->kind == BrokerEvent::Kind::kConnectionClosed) spdlog::warn("AMQP {}", ev->reason);
    }
    if (!amqp_.connected()) give_back_listen_lock();  // it cannot publish what it is woken for
    if (n == 0) std::this_thread::sleep_for(std::min(left, milliseconds(100)));
  }
  return false;
}

// The holder of the waiting lock is the one relay producers' notifications wake
// (sleep_until_work): one that cannot publish (no broker, an alarm, a hold, a failed
// claim, a batch waiting long for its confirms, a stop) gives it back with a
// handover, so an idle relay takes it and the rows at once, not at its fallback poll.
void RelayLoop::give_back_listen_lock() {
  if (!listener_.armed()) return;
  metrics_->set_listen_role(ListenRole::kNone);
  try {
    listener_.disarm(NotifyListener::Release::kHandOver);
  } catch (const std::exception& e) {
    spdlog::warn("PostgreSQL listener session failed, polling until it is back: {}", outbox::one_line(e.what()));
    listener_.disconnect();
  }
}

// Sleeps up to `total`, servicing AMQP heartbeats and broker events, and wakes
// early on stop.
void RelayLoop::idle_wait(milliseconds total) {
  const auto until = Clock::now() + total;
  while (!stop_) {
    auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    if (left <= milliseconds(0)) return;
    auto slice = std::min(left, milliseconds(100));
    note_state();
    if (amqp_.connected()) {
      auto ev = amqp_.next_event(slice);
      if (ev && ev->kind == BrokerEvent::Kind::kConnectionClosed) spdlog::warn("AMQP {}", ev->reason);
    } else {
      std::this_thread::sleep_for(slice);
    }
  }
}

void RelayLoop::maybe_log_summary(bool force) {
  auto now = Clock::now();
  auto elapsed = std::chrono::duration<double>(now - last_summary_).count();
  if (!force && elapsed < config_.relay.summary_interval_s) return;
  OutboxStore* store = free_store();  // a session with no claim transaction open
  if (!store && !force && !inflight_.empty()) return;  // after the next commit
  double rate = elapsed > 0 ? (counters_.published - published_at_last_summary_) / elapsed : 0;
  last_summary_ = now;
  published_at_last_summary_ = counters_.published;
  PendingStats stats;
  try {
    if (!store) throw std::runtime_error("not connected");
    stats = store->stats();  // one statement, no BEGIN/COMMIT
  } catch (const std::exception& e) {
    spdlog::info("summary: published {} ({:.0f}/s), failed {}, parked {}; pending unknown: {}",
                 counters_.published, rate, counters_.failed, counters_.parked, outbox::one_line(e.what()));
    return;
  }
  spdlog::info("summary: published {} ({:.0f}/s), failed {}, pending {}, parked {}, "
               "oldest pending {:.1f} s", counters_.published, rate, counters_.failed,
               stats.pending, stats.parked, stats.oldest_pending_age_s);
}

}  // namespace relay
