#include "loop/confirm_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "metrics/stage_cpu.h"
#include "outbox/log_fields.h"
#include "outbox/one_line.h"
#include "policy/failure_policy.h"

namespace relay {

using std::chrono::milliseconds;

ConfirmReader::ConfirmReader(const RelayConfig& config, BrokerLink& amqp, BatchPipeline& batches, Isolator& isolator,
                             PublishHold& hold, StallWatch& stall, RelayMetrics& metrics, const LoopClock& clock)
    : config_(config),
      clock_(clock),
      amqp_(amqp),
      batches_(batches),
      isolator_(isolator),
      hold_(hold),
      stall_(stall),
      metrics_(metrics),
      deadline_(milliseconds(config.postgres.idle_in_transaction_timeout_ms),
                milliseconds(config.amqp.confirm_timeout_ms)) {}

// Called on every turn of the loop: when nothing came (the common case at a low
// rate) it costs one poll(), not the library's receive and poll and the stage's two
// clock reads (system calls all).
void ConfirmReader::pump() {
  if (!amqp_.readable_now()) return;
  const StageCpu::Scope cpu(CpuStage::kSettle);  // one scope for all the events read
  while (amqp_.connected() && read_one(milliseconds(0))) {
  }
}

// Acks of other rows do not extend a tag's timeout, so one row a queue never
// confirms cannot hold its batch (and its row locks) open for ever.
void ConfirmReader::await() {
  const StageCpu::Scope cpu(CpuStage::kSettle);
  const auto oldest = batches_.oldest_unconfirmed();
  if (!oldest) {  // nothing to confirm: waiting out a hold or an alarm
    read_one(milliseconds(100));
    return;
  }
  const milliseconds timeout(config_.amqp.confirm_timeout_ms);
  const auto left = std::chrono::duration_cast<milliseconds>(*oldest + timeout - clock_.now());
  if (left > milliseconds(0)) {
    read_one(std::min(left, milliseconds(100)));  // slices keep /healthz fed
    return;
  }
  if (amqp_.blocked()) {
    // The broker blocked the connection (resource alarm) and reads nothing until it
    // unblocks. Keep the connection: tags only grow on the channel, so a late ack
    // settles nothing of a later batch; the loop claims nothing while blocked.
    batches_.fail_outstanding({FailureCause::kBrokerBlocked,
                               "not confirmed: broker blocked publishing (resource alarm)"},
                              ConfirmTracker::Outcome::kFailed);
    for (auto& b : batches_) b->stop_publishing();
    return;
  }
  if (clock_.now() - last_event_ < timeout) {  // it confirms others: not hung
    fail_overdue(timeout);
    return;
  }
  // Nothing at all from the broker within the timeout: it may hang, so start over on
  // a fresh connection; the rows stay pending.
  link_lost("no broker confirm within amqp.confirm_timeout_ms (" + std::to_string(config_.amqp.confirm_timeout_ms) +
            " ms)");
  spdlog::warn("confirm timeout at {}; reconnecting", amqp_.endpoint());
  amqp_.disconnect();
}

void ConfirmReader::link_lost(const std::string& reason) {
  batches_.lose_link({FailureCause::kLinkLost, reason});
  isolator_.set_solo(false);
  stall_.failure(reason, clock_.now());
  metrics_.on_channel_reset();
}

// Handles at most one broker event; false when none came within `timeout`. Its
// callers charge its CPU to CpuStage::kSettle.
bool ConfirmReader::read_one(milliseconds timeout) {
  auto ev = amqp_.next_event(timeout);
  if (!ev) return false;
  last_event_ = clock_.now();
  switch (ev->kind) {
    case BrokerEvent::Kind::kAck: on_ack(*ev); break;
    case BrokerEvent::Kind::kNack: on_nack(*ev); break;
    case BrokerEvent::Kind::kReturn: batches_.on_return(ev->message_id, ev->reason); break;
    case BrokerEvent::Kind::kChannelClosed: on_channel_closed(*ev); break;
    case BrokerEvent::Kind::kConnectionClosed:
      spdlog::warn("AMQP {}", ev->reason);
      link_lost(ev->reason);
      break;
  }
  return true;
}

void ConfirmReader::on_ack(const BrokerEvent& ev) {
  batches_.on_ack(ev.tag, ev.multiple, last_event_);
  metrics_.on_acked(ev.tag, ev.multiple);
  hold_.acked();
  if (nack_run_.nacking()) {
    spdlog::info("the broker at {} acks again after {} nack(s) in a row", amqp_.endpoint(), nack_run_.in_row());
    metrics_.set_nacking(false, "");
  }
  nack_run_.acked();
  restart_due_ = false;
  // A row the broker took is progress, though its batch has not committed yet: a
  // batch of big rows takes longer than stall_after_s and is not a stall.
  stall_.progress(last_event_);
}

void ConfirmReader::on_nack(const BrokerEvent& ev) {
  batches_.on_nack(ev.tag, ev.multiple, ev.reason);
  metrics_.on_unconfirmed(ev.tag, ev.multiple);
  // One per event: RabbitMQ nacks one tag at a time but for a multiple nack, which at
  // worst makes a run a little longer before the restart.
  if (nack_run_.nacked(1, last_event_)) {
    // Into a wall: publish nothing more for a while (PublishHold) and start over on a
    // fresh connection once what is outstanding is settled: a queue full with
    // reject-publish nacks at once but acks the one row it took after its disk
    // write, and that ack must not be lost with the connection.
    const auto why = nack_run_.describe(last_event_);
    metrics_.set_nacking(true, why);
    stall_.failure(why, last_event_);
    const auto delay = hold_.after_nacks(last_event_);
    // Warned once per run; the restarts after it (about one a second) are for debug.
    spdlog::log(nack_run_.restarts() == 1 ? spdlog::level::warn : spdlog::level::debug,
                "{}; reconnecting to the broker (now {}) and pausing publishing for {} ms", why, amqp_.endpoint(),
                delay.count());
    restart_due_ = true;
  }
  if (restart_due_ && batches_.outstanding() == 0) {
    restart_due_ = false;
    link_lost(nack_run_.describe(last_event_));
    amqp_.disconnect();
  }
}

void ConfirmReader::hold(const std::string& why) {
  const auto delay = hold_.after_close(clock_.now());
  spdlog::warn("{}; publishing paused for {} ms", why, delay.count());
}

void ConfirmReader::on_channel_closed(const BrokerEvent& ev) {
  metrics_.on_channel_reset();  // the reopened channel's tags start again from 1
  const bool probing = isolator_.solo();
  isolator_.set_solo(false);
  stall_.failure(ev.reason, clock_.now());
  const std::size_t n = batches_.outstanding();
  switch (FailurePolicy::on_channel_close(ev.reply_code, n, ev.connection_level)) {
    case CloseAction::kHoldAll:
      batches_.fail_outstanding({FailureCause::kNone, ev.reason}, ConfirmTracker::Outcome::kEnvironment);
      hold("AMQP " + ev.reason + "; no message is at fault");
      return;
    case CloseAction::kHoldIdle: hold("AMQP " + ev.reason + " with nothing outstanding"); return;
    case CloseAction::kChargeSole: charge_sole_outstanding(ev.reason, ev.reply_code); return;
    case CloseAction::kIsolate: break;
  }
  // The culprit is among the outstanding: halve the group. They go back in front of
  // the suspects not yet probed, in their order.
  isolator_.split(n);
  if (!probing) {
    spdlog::warn(
        "AMQP {}; channel reopened; publishing the {} unconfirmed rows again in halving groups to "
        "find the one at fault",
        ev.reason, n);
    metrics_.isolation_started(n);
  }
  batches_.suspect_outstanding();
}

void ConfirmReader::charge_sole_outstanding(const std::string& reason, int reply_code) {
  for (auto& b : batches_) {
    const std::size_t i = b->tracker().sole_outstanding();
    if (i == static_cast<std::size_t>(-1)) continue;
    const auto& row = b->rows()[i];
    if (reply_code == 404 || reply_code == 403)  // the exchange's doing: its other rows go alone
      isolator_.exchange_refused(row.exchange, clock_.now());
    const auto level = isolator_.new_refusal(reason) ? spdlog::level::warn : spdlog::level::debug;
    outbox::LogFields fields{{"row_id", row.id},
                             {"message_id", outbox::one_line(row.message_id, 64)},
                             {"attempt", row.attempts + 1},
                             {"reason", FailurePolicy::kRefusedPrefix + reason}};
    spdlog::log(level, "AMQP {}; row {} (message {}) provoked it and is charged an attempt; channel reopened", reason,
                row.id, outbox::one_line(row.message_id, 64));
    b->tracker().on_refused(i, FailurePolicy::kRefusedPrefix + reason);
  }
}

void ConfirmReader::fail_overdue(milliseconds timeout) {
  const std::string why = "no broker confirm within amqp.confirm_timeout_ms (" +
                          std::to_string(config_.amqp.confirm_timeout_ms) + " ms), while it confirmed others";
  const auto tags = batches_.fail_published_before(clock_.now() - timeout, {FailureCause::kConfirmTimeout, why});
  for (const auto tag : tags) metrics_.on_unconfirmed(tag, false);
  stall_.failure(why, clock_.now());
  spdlog::warn(
      "{} row(s) got {}; they will be published again after a backoff (a queue that cannot "
      "confirm them: suspended, without a majority?)",
      tags.size(), why);
}

void ConfirmReader::enforce_deadlines() {
  if (batches_.empty()) return;  // an idle relay's turn reads no clock
  const auto now = clock_.now();
  const auto limit = [this] {
    return " (" + std::to_string(deadline_.commit_within().count()) +
           " ms of postgres.idle_in_transaction_timeout_ms " +
           std::to_string(config_.postgres.idle_in_transaction_timeout_ms) + ")";
  };
  for (auto& b : batches_) {
    const auto idle = now - b->session_used_at();
    if (b->publishing() && idle >= deadline_.publish_for()) {
      // The rows not sent (and suspects not probed again) stay pending: the next
      // claim takes them at once, in a transaction of its own.
      const auto suspects = b->withhold({FailureCause::kBatchWithheld,
                                         "not published: its batch reached its time limit" + limit()});
      spdlog::warn("a batch of {} rows published {} of them in {} ms and publishes no more: {}", b->rows().size(),
                   b->published(), std::chrono::duration_cast<milliseconds>(idle).count(), b->withheld().text);
      // An isolation cut short starts over in the next batch, and would be cut again
      // if the link is that slow, its culprit never found: its suspects go alone
      // instead, each its own round trip (the next batches find it).
      for (const auto i : suspects) isolator_.isolation_cut_short(b->rows()[i].id, now);
      stall_.failure(b->withheld().text, now);
    }
    if (idle < deadline_.commit_within() || b->tracker().outstanding() == 0) continue;
    const std::string why = "no broker confirm before its batch's time limit" + limit();
    const auto tags = b->tracker().fail_oldest_while([](std::size_t) { return true; }, {FailureCause::kBatchLate, why});
    for (const auto tag : tags) metrics_.on_unconfirmed(tag, false);
    stall_.failure(why, clock_.now());
    spdlog::warn("{} row(s) got {}; the batch commits the rest, they are published again after a backoff", tags.size(),
                 why);
  }
}

}  // namespace relay
