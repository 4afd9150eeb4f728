// RelayLoop: how failures are settled, and what happens when the broker closes the channel. Whose fault it is
// (FailurePolicy), and, when one of several outstanding rows provoked it without
// the broker saying which, finding that row by publishing them again one at a time.
#include <spdlog/spdlog.h>

#include <chrono>

#include "policy/failure_policy.h"
#include "outbox/log_fields.h"
#include "outbox/one_line.h"
#include "loop/relay_loop.h"

namespace relay {
namespace {

using std::chrono::milliseconds;

// How long an exchange the broker refused a row for (or a row whose isolation was
// cut short) makes the rows bound for it (the row) go alone, and how many are
// remembered (rows written by hand may name any number; past it the memory starts
// again).
constexpr std::chrono::seconds kGoAloneMemory{30};
constexpr std::size_t kMaxGoAlone = 1024;

using TimePoint = std::chrono::steady_clock::time_point;

template <class Key>
void remember_alone(std::map<Key, TimePoint>& memory, const Key& key) {
  if (memory.size() >= kMaxGoAlone) memory.clear();
  memory[key] = std::chrono::steady_clock::now() + kGoAloneMemory;
}

// Whether `key` is remembered and not expired (an expired entry is dropped).
template <class Key>
bool remembered_alone(std::map<Key, TimePoint>& memory, const Key& key) {
  if (memory.empty()) return false;
  const auto it = memory.find(key);
  if (it == memory.end()) return false;
  if (std::chrono::steady_clock::now() <= it->second) return true;
  memory.erase(it);
  return false;
}

}  // namespace

// Three cases, by the close's reply code and what was outstanding:
// - a server or connection failure: nobody's attempt; the outstanding rows are
//   retried after a backoff and the relay publishes nothing for a while, so a
//   broker that keeps closing channels never makes it spin;
// - a code a message can provoke, with exactly one row outstanding: that row is at
//   fault (it is settled kRefused: an attempt, parked at max_attempts);
// - the same with several outstanding: each goes back to its batch as a suspect,
//   and publish_probe() sends them in groups of half that many, nothing else on the
//   channel until a group is settled: a group acked in full is clean, a group that
//   closes the channel is halved again, until the one at fault closes it alone and
//   is charged. n suspects cost at most 2n extra publishes of innocent rows (n + n/2
//   + n/4 ...; n <= amqp.publish_window) and about 2 log2(n) confirm round trips.
//   A charged row goes alone on its later attempts (ClaimedRow::refused_before), so
//   it cannot take others down with it again.
void RelayLoop::on_channel_closed(const BrokerEvent& ev) {
  metrics_->on_channel_reset();  // the reopened channel's tags start again from 1
  const bool probing = solo_;
  solo_ = false;
  last_failure_ = ev.reason;
  const std::size_t n = outstanding();
  switch (FailurePolicy::on_channel_close(ev.reply_code, n, ev.connection_level)) {
    case CloseAction::kHoldAll:
      for (auto& b : inflight_)
        b->tracker.fail_outstanding({FailureCause::kNone, ev.reason}, ConfirmTracker::Outcome::kEnvironment);
      hold_publishing("AMQP " + ev.reason + "; no message is at fault");
      return;
    case CloseAction::kHoldIdle:
      hold_publishing("AMQP " + ev.reason + " with nothing outstanding");
      return;
    case CloseAction::kChargeSole:
      charge_sole_outstanding(ev.reason, ev.reply_code);
      return;
    case CloseAction::kIsolate:
      break;
  }
  // The culprit is among the outstanding: halve the group. They go back in front
  // of the suspects not yet probed, in their order.
  probe_size_ = (n + 1) / 2;
  if (!probing) {
    spdlog::warn("AMQP {}; channel reopened; publishing the {} unconfirmed rows again in halving groups to "
                 "find the one at fault", ev.reason, n);
    metrics_->isolation_started(n);
  }
  for (auto& b : inflight_) {
    const auto rows = b->tracker.take_outstanding();
    b->suspects.insert(b->suspects.begin(), rows.begin(), rows.end());
  }
}

void RelayLoop::charge_sole_outstanding(const std::string& reason, int reply_code) {
  for (auto& b : inflight_) {
    const std::size_t i = b->tracker.sole_outstanding();
    if (i == static_cast<std::size_t>(-1)) continue;
    if (reply_code == 404 || reply_code == 403)  // the exchange's doing: its other rows go alone
      remember_alone(refusing_exchanges_, b->rows[i].exchange);
    // Once per distinct reason in a row: a missing exchange charges every row sent to it.
    const auto level = reason == last_refusal_ ? spdlog::level::debug : spdlog::level::warn;
    last_refusal_ = reason;
    const auto& row = b->rows[i];
    outbox::LogFields fields{{"row_id", row.id}, {"message_id", outbox::one_line(row.message_id, 64)},
                             {"attempt", row.attempts + 1}, {"reason", FailurePolicy::kRefusedPrefix + reason}};
    spdlog::log(level, "AMQP {}; row {} (message {}) provoked it and is charged an attempt; channel reopened",
                reason, row.id, outbox::one_line(row.message_id, 64));
    b->tracker.on_refused(i, FailurePolicy::kRefusedPrefix + reason);
  }
}

std::optional<RelayLoop::Clock::time_point> RelayLoop::oldest_unconfirmed() const {
  std::optional<Clock::time_point> oldest;
  for (const auto& b : inflight_) {
    const std::size_t row = b->tracker.oldest_outstanding();
    if (row == static_cast<std::size_t>(-1)) continue;
    const auto at = b->timeline.published_at(row);
    if (!oldest || at < *oldest) oldest = at;
  }
  return oldest;
}

void RelayLoop::fail_overdue(std::chrono::milliseconds timeout) {
  const auto limit = Clock::now() - timeout;
  const std::string why = "no broker confirm within amqp.confirm_timeout_ms (" +
                          std::to_string(config_.amqp.confirm_timeout_ms) + " ms), while it confirmed others";
  std::size_t n = 0;
  for (auto& b : inflight_) {
    const auto& timeline = b->timeline;
    const auto tags = b->tracker.fail_oldest_while([&](std::size_t row) { return timeline.published_at(row) <= limit; },
                                                   {FailureCause::kConfirmTimeout, why});
    for (const auto tag : tags) metrics_->on_unconfirmed(tag, false);
    n += tags.size();
  }
  last_failure_ = why;
  spdlog::warn("{} row(s) got {}; they will be published again after a backoff (a queue that cannot "
               "confirm them: suspended, without a majority?)", n, why);
}

void RelayLoop::enforce_deadlines() {
  if (inflight_.empty()) return;  // an idle relay's turn reads no clock
  const auto now = Clock::now();
  const auto limit = [this] {
    return " (" + std::to_string(deadline_.commit_within().count()) + " ms of postgres.idle_in_transaction_timeout_ms " +
           std::to_string(config_.postgres.idle_in_transaction_timeout_ms) + ")";
  };
  for (auto& b : inflight_) {
    const auto idle = now - b->session_used_at;
    const bool publishing = !b->publishing_done || !b->suspects.empty();
    if (publishing && idle >= deadline_.publish_for()) {
      // The rows not sent (and suspects not probed again) stay pending: the next
      // claim takes them at once, in a transaction of its own.
      b->withheld = {FailureCause::kBatchWithheld, "not published: its batch reached its time limit" + limit()};
      spdlog::warn("a batch of {} rows published {} of them in {} ms and publishes no more: {}", b->rows.size(),
                   b->published, std::chrono::duration_cast<milliseconds>(idle).count(), b->withheld.text);
      b->publishing_done = true;
      // An isolation cut short starts over in the next batch, and would be cut
      // again if the link is that slow, its culprit never found: its suspects go
      // alone instead, each its own round trip (the next batches find it).
      for (const auto i : b->suspects) remember_alone(lone_rows_, b->rows[i].id);
      b->suspects.clear();
      last_failure_ = b->withheld.text;
    }
    if (idle < deadline_.commit_within() || b->tracker.outstanding() == 0) continue;
    const std::string why = "no broker confirm before its batch's time limit" + limit();
    const auto tags = b->tracker.fail_oldest_while([](std::size_t) { return true; }, {FailureCause::kBatchLate, why});
    for (const auto tag : tags) metrics_->on_unconfirmed(tag, false);
    last_failure_ = why;
    spdlog::warn("{} row(s) got {}; the batch commits the rest, they are published again after a backoff",
                 tags.size(), why);
  }
}

bool RelayLoop::must_go_alone(ClaimedRow& row) {
  if (row.refused_before) return true;
  // Perhaps declared since (an exchange), or found innocent meanwhile (a row): past
  // their time, rows go together again.
  if (!remembered_alone(refusing_exchanges_, row.exchange) && !remembered_alone(lone_rows_, row.id)) return false;
  row.refused_before = true;
  return true;
}

// Rows due but none published for relay.stall_after_s: said once per stall (log,
// gauge, /readyz with the latest failure), and once when it ends.
void RelayLoop::check_stall() {
  // Idle, and no retry this relay scheduled is still to come: nothing is due.
  if (inflight_.empty() && last_claim_empty_ &&
      (!retry_due_until_ || Clock::now() > *retry_due_until_ + std::chrono::seconds(1)))
    note_progress();
  const auto since = Clock::now() - progress_at_;
  const bool stalled = since > std::chrono::seconds(config_.relay.stall_after_s);
  if (stalled == stalled_) return;
  stalled_ = stalled;
  if (!stalled) {  // progress_at_ is now: the stall lasted from its last progress before
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - stall_began_).count();
    spdlog::info("publishing resumed after a stall of {} s", secs);
    metrics_->set_stalled(false, "");
    return;
  }
  stall_began_ = progress_at_;
  const std::string why = "publishing stalled: rows are due but none was published for over " +
                          std::to_string(config_.relay.stall_after_s) + " s; last failure: " +
                          (last_failure_.empty() ? "none recorded" : last_failure_);
  spdlog::warn("{}", why);
  metrics_->set_stalled(true, why);
}

// Splits the batch by outcome; FailurePolicy::settle decides each row's fate: marked
// published, retried (at once or after a backoff, an attempt or not) or parked.
void RelayLoop::settle(InflightBatch& b, std::vector<const ClaimedRow*>& acked, std::vector<FailedRow>& failed) {
  const double now_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Rows left unpublished while the broker blocked the connection, or by the
  // batch's time limit: say so (their metric and last_error), not "connection lost".
  const Failure unsent = amqp_.blocked()
                             ? Failure{FailureCause::kBrokerBlocked, "not published: broker blocked publishing (resource alarm)"}
                             : b.withheld;
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    const auto& row = b.rows[i];
    const auto outcome = b.tracker.outcome(i);
    const bool never_settled = outcome == ConfirmTracker::Outcome::kUnconfirmed && b.tracker.reason(i).empty();
    const FailureCause cause = never_settled ? unsent.cause : b.tracker.cause(i);
    const std::string& reason = never_settled ? unsent.text : b.tracker.reason(i);
    // The environment's failures wait a step further each time in a row.
    const int streak = FailurePolicy::waits_on_environment(outcome, cause) ? streaks_.count_failure(row.id) : 0;
    const auto s = FailurePolicy::settle(outcome, cause, row.attempts, config_.relay.max_attempts, streak);
    if (s.action == Settlement::Action::kMarkPublished || s.verdict.counts_as_attempt)
      streaks_.forget(row.id);  // published, charged or parked: the streak ends
    if (s.action == Settlement::Action::kMarkPublished) {
      acked.push_back(&row);
      metrics_->enqueue_to_confirm(now_unix - row.created_unix);
      continue;
    }
    failed.push_back(failed_row(row, s, reason));
    failed.back().refused_by_broker = outcome == ConfirmTracker::Outcome::kRefused;
  }
}

// Each row marked published (acked: FailurePolicy marks exactly those) in a batch
// that just committed; rows published again during an isolation count from their
// last publish.
void RelayLoop::observe_stages(const InflightBatch& b) {
  const auto committed = Clock::now();
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    if (b.tracker.outcome(i) != ConfirmTracker::Outcome::kAcked) continue;
    if (const auto stages = b.timeline.stages(i, b.rows[i].created_unix, committed)) metrics_->row_stages(*stages);
  }
}

FailedRow RelayLoop::failed_row(const ClaimedRow& row, const Settlement& s, const std::string& why) {
  const Verdict& v = s.verdict;
  metrics_->failure(v.metric);
  FailedRow f{row.id, outbox::one_line(why.empty() ? "not published: connection lost before publish" : why), 0,
              v.counts_as_attempt};
  if (s.action != Settlement::Action::kRetryAtOnce) f.retry_in_ms = backoff_.delay(s.backoff_attempt).count();
  // The stall report's cause: a row's own failure, or the environment's that
  // makes it wait (a nack, a confirm timeout), not a mere retry at once.
  if (s.action != Settlement::Action::kRetryAtOnce) last_failure_ = "row " + std::to_string(row.id) + ": " + f.error;
  if (s.action == Settlement::Action::kPark) {
    ++counters_.parked;
    metrics_->parked();
    outbox::LogFields fields{{"row_id", row.id}, {"message_id", outbox::one_line(row.message_id, 64)},
                             {"attempt", row.attempts + 1}, {"reason", f.error}};
    spdlog::warn("row {} (message {}) parked after {} attempts: {}", row.id, outbox::one_line(row.message_id, 64),
                 row.attempts + 1, f.error);
    return f;
  }
  // Due again later: until then an empty claim does not mean nothing is due.
  const auto due = Clock::now() + std::chrono::milliseconds(f.retry_in_ms);
  if (!retry_due_until_ || due > *retry_due_until_) retry_due_until_ = due;
  return f;
}

void RelayLoop::hold_publishing(const std::string& why) { hold_publishing(why, ++environment_closes_); }

void RelayLoop::hold_publishing(const std::string& why, int step) {
  const auto delay = reconnect_backoff_.delay(step);
  hold_until_ = std::max(hold_until_, Clock::now() + delay);
  spdlog::warn("{}; publishing paused for {} ms", why, delay.count());
}

// The relay's own retries wake it when due, so an idle relay needs no fast poll
// to honour its backoff. Rows failed without an attempt are due at once.
void RelayLoop::note_retries(const std::vector<FailedRow>& failed) {
  if (next_retry_at_ && *next_retry_at_ <= Clock::now()) next_retry_at_.reset();  // already due
  for (const auto& f : failed) {
    if (f.retry_in_ms <= 0) {
      last_claim_empty_ = false;
      continue;
    }
    auto due = Clock::now() + std::chrono::milliseconds(f.retry_in_ms);
    if (!next_retry_at_ || due < *next_retry_at_) next_retry_at_ = due;
  }
}

}  // namespace relay
