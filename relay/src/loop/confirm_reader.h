#pragma once
// ConfirmReader: what the broker says about the batches in flight, and what its
// silence means.

#include <chrono>
#include <string>

#include "broker/broker_event.h"
#include "broker/broker_link.h"
#include "config/config.h"
#include "loop/batch_pipeline.h"
#include "loop/isolator.h"
#include "loop/publish_hold.h"
#include "loop/stall_watch.h"
#include "metrics/relay_metrics.h"
#include "policy/batch_deadline.h"
#include "policy/loop_clock.h"
#include "policy/nack_run.h"

namespace relay {

// Reads the broker's acks, nacks, returns and closes into the batches in flight
// (BatchPipeline), and turns silence into failures:
// - each delivery tag has amqp.confirm_timeout_ms from its own publish: while the
//   broker confirms others, the overdue rows fail (no attempt, a growing backoff)
//   and the connection stays; when it confirms nothing at all, the connection goes
//   (it may hang) and the rows stay pending;
// - each batch's BatchDeadline: past publish_for() it publishes no more; past
//   commit_within() its unconfirmed rows fail (no attempt) and it commits, before
//   the server's idle-in-transaction timeout would end its session;
// - a channel close is judged by FailurePolicy::on_channel_close: the environment's
//   (hold, nobody's attempt), one row's (charged), or one of several (isolation:
//   the outstanding rows become suspects, Isolator);
// - a run of nacks with no ack (NackRun): every NackRun::kRunLength of them the
//   connection is started over, once nothing is outstanding (a channel that kept a
//   dead quorum leader nacks for ever; a fresh one does not) after a growing pause of at most a second
//   (PublishHold::after_nacks), and /readyz says "the broker nacked every publish"
//   until the next ack. The rows stay pending, nobody's attempt.
//
// Times come from `clock`; the broker's silence is what next_event() returns
// empty-handed after its timeout.
// Thread safety: none; the loop's thread owns it. REQUIRES: every reference
// outlives it.
class ConfirmReader {
 public:
  using Clock = LoopClock::Clock;

  ConfirmReader(const RelayConfig& config, BrokerLink& amqp, BatchPipeline& batches, Isolator& isolator,
                PublishHold& hold, StallWatch& stall, RelayMetrics& metrics, const LoopClock& clock);

  // Reads what the broker sent, without waiting (one poll() when nothing came).
  void pump();
  // Waits a slice (at most 100 ms) for the broker while batches are in flight;
  // applies the confirm timeout.
  void await();
  void enforce_deadlines();
  // Every batch in flight loses what is outstanding and publishes no more.
  void link_lost(const std::string& reason);

 private:
  bool read_one(std::chrono::milliseconds timeout);
  void on_channel_closed(const BrokerEvent& event);
  // FailurePolicy's kChargeSole: the one outstanding row provoked the close.
  void charge_sole_outstanding(const std::string& reason, int reply_code);
  void fail_overdue(std::chrono::milliseconds timeout);
  void hold(const std::string& why);  // a close nobody is to blame for
  void on_nack(const BrokerEvent& event);
  void on_ack(const BrokerEvent& event);

  const RelayConfig& config_;
  const LoopClock& clock_;
  BrokerLink& amqp_;
  BatchPipeline& batches_;
  Isolator& isolator_;
  PublishHold& hold_;
  StallWatch& stall_;
  RelayMetrics& metrics_;
  BatchDeadline deadline_;
  NackRun nack_run_;
  bool restart_due_ = false;      // a nack run: start over once nothing is outstanding
  Clock::time_point last_event_;  // the last ack, nack, return or close read
};

}  // namespace relay
