#pragma once
// WakeCoordinator: how an idle relay waits for work, and who answers producers.

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "broker/broker_link.h"
#include "config/config.h"
#include "metrics/relay_metrics.h"
#include "pg/outbox_rows.h"
#include "pg/wake_listener.h"
#include "policy/listen_arm_policy.h"
#include "policy/loop_clock.h"

namespace relay {

// With relay.listen, one idle relay holds the waiting lock (a WakeListener) and
// producers' inserts wake it; the others poll at listen_poll_interval_ms and wake
// on a handover. This drives the listener session and the lock's state:
// - sleep(): arm the listener (once armed, the caller claims once more: every
//   insert that did not notify has ended) or sleep until a notification, the
//   fallback poll, `wake_by`, or stop; poll_busy(): a relay busy a moment ago
//   claims again within a millisecond instead, so producers need not notify at
//   steady rates;
// - give_back(): a relay that cannot work now (no broker, an alarm, a hold, a
//   failed claim, a slow batch, a stop) hands the lock over, so an idle relay
//   takes it and the rows at once;
// - judge_holder(): a bystander's fallback poll that finds rows nobody attempted
//   means the holder does not answer (a session left by a partition, a hung
//   process): this relay then answers producers' notifications too, until a claim
//   on a notification finds nothing again.
// While it waits, the broker's socket is serviced too (heartbeats, closes).
//
// Its waits and times are `clock`'s.
// Thread safety: none; the loop's thread owns it. `tick` runs at least every 100 ms
// of a wait (the loop's heartbeat). REQUIRES: every reference outlives it.
class WakeCoordinator {
 public:
  using Clock = LoopClock::Clock;

  WakeCoordinator(const RelaySettings& relay, BrokerLink& amqp, WakeListener& listener, RelayMetrics& metrics,
                  const LoopClock& clock, const std::atomic<bool>& stop, std::function<void()> tick);

  // Waits for work; returns whether the next claim should ask has_due_rows() first
  // (a fallback poll: rows are unlikely) rather than claim at once (a notification,
  // or the lock just taken). `per_key`: lanes decide who claims a row, so this relay
  // never sleeps through producers' notifications.
  bool sleep(Clock::time_point wake_by, bool per_key);
  // Sleeps up to `total`, servicing the broker's socket; wakes early on stop.
  void pause(std::chrono::milliseconds total);

  bool armed() const { return listener_.armed(); }
  void give_back();
  // After each claim (`rows` what it found; none for a probe that found nothing).
  void judge_holder(const std::vector<ClaimedRow>& rows);
  // A claim failed: no verdict on the holder from this wake, and the next wait is an
  // idle relay's (not a busy one's poll: ListenArmPolicy::busy_poll).
  void forget_wake() {
    polled_as_bystander_ = woke_on_notification_ = false;
    arm_policy_.cool_down();
  }
  // Whether a relay with nothing to do should poll_busy() rather than sleep()
  // (ListenArmPolicy::poll_instead_of_arming): busy a moment ago, it leaves the lock
  // alone and claims again after ListenArmPolicy::busy_poll().
  bool polling_busy(Clock::time_point now) const {
    return relay_.listen && !listener_.armed() && arm_policy_.poll_instead_of_arming(now);
  }
  // A busy relay's wait of ListenArmPolicy::busy_poll() (at most until `wake_by`): it
  // reads what came on both sockets (the listener's too: unread notifications fill
  // the server's queue) and waits on neither. The caller claims next.
  void poll_busy(Clock::time_point wake_by);
  // Whether an armed relay should give the lock back after a claim of `rows`.
  bool release_after_claim(std::size_t rows, Clock::time_point now) {
    return arm_policy_.release_after_claim(rows, now);
  }

 private:
  bool listener_ready();
  // What came on the listener's session; nothing when the session was lost (logged,
  // and disconnected: the next sleep() connects again).
  std::optional<WakeListener::Wake> read_listener();
  // Sleeps until `until` on both sockets; true when a notification woke it, or the
  // listener session or the broker connection was lost (the loop looks and
  // reconnects at once instead of sleeping out the fallback poll).
  // `handover_only`: producers' notifications are the holder's to answer.
  bool wait(Clock::time_point until, bool handover_only);
  void drain_broker_events();

  const RelaySettings& relay_;
  BrokerLink& amqp_;
  WakeListener& listener_;
  RelayMetrics& metrics_;
  const LoopClock& clock_;
  const std::atomic<bool>& stop_;
  std::function<void()> tick_;
  ListenArmPolicy arm_policy_;
  WakeListener::Arm arm_state_ = WakeListener::Arm::kProducerBusy;
  bool listener_failed_ = false;  // logged once until it works again
  // The last wake: a bystander's fallback poll, or a notification (judge_holder).
  bool polled_as_bystander_ = false, woke_on_notification_ = false;
  bool answer_for_holder_ = false;
};

}  // namespace relay
