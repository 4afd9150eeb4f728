#include "relay_loop.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <thread>

#include "one_line.h"

namespace relay {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The metrics label of a row that was not acked.
FailureReason failure_reason(ConfirmTracker::Outcome outcome, const std::string& reason, bool channel) {
  using Outcome = ConfirmTracker::Outcome;
  if (outcome == Outcome::kNacked) return FailureReason::kNack;
  if (outcome == Outcome::kReturned) return FailureReason::kReturned;
  if (channel) return FailureReason::kChannelClosed;
  if (reason.rfind("no broker confirm", 0) == 0) return FailureReason::kConfirmTimeout;
  if (reason.find("blocked") != std::string::npos) return FailureReason::kBlocked;
  return FailureReason::kConnectionLost;
}

RelaySettings reconnect_settings() {
  RelaySettings s;
  s.backoff_initial_ms = 200;
  s.backoff_max_ms = 10000;
  s.backoff_factor = 2.0;
  return s;
}

}  // namespace

RelayLoop::RelayLoop(RelayConfig config, const std::atomic<bool>& stop, RelayMetrics* metrics)
    : config_(std::move(config)),
      stop_(stop),
      store_(config_.postgres),
      amqp_(config_.amqp),
      backoff_(config_.relay),
      reconnect_backoff_(reconnect_settings()),
      last_summary_(Clock::now()),
      metrics_(metrics) {
  if (!metrics_) {  // nobody scrapes: count into a private registry
    own_registry_ = std::make_unique<metrics::Registry>();
    own_metrics_ = std::make_unique<RelayMetrics>(*own_registry_, "");
    metrics_ = own_metrics_.get();
  }
}

void RelayLoop::note_state() {
  metrics_->heartbeat();
  metrics_->set_connected(store_.connected(), amqp_.connected(), amqp_.blocked());
}

int RelayLoop::run(bool exit_when_idle) {
  spdlog::info("relay starting: schema '{}', batch_size {}, publish_window {}",
               config_.postgres.schema, config_.relay.batch_size, config_.amqp.publish_window);
  while (!stop_) {
    note_state();
    if (!ensure_connected()) continue;
    if (amqp_.blocked()) {
      idle_wait(milliseconds(config_.relay.poll_interval_ms));
      continue;
    }
    std::size_t claimed = run_batch();
    maybe_log_summary(false);
    if (claimed == 0) {
      if (exit_when_idle) break;
      idle_wait(milliseconds(config_.relay.poll_interval_ms));
    }
  }
  maybe_log_summary(true);
  spdlog::info("relay stopped: {} published, {} failed, {} parked", counters_.published,
               counters_.failed, counters_.parked);
  return 0;
}

bool RelayLoop::ensure_connected() {
  if (store_.connected() && amqp_.connected()) return true;
  std::string error;
  try {
    if (!store_.connected()) {
      store_.connect();
      metrics_->connected_to("postgres");
    }
  } catch (const std::exception& e) {
    error = "PostgreSQL: " + one_line(e.what());
  }
  if (error.empty()) {
    try {
      if (!amqp_.connected()) {
        amqp_.connect();
        metrics_->connected_to("amqp");
      }
    } catch (const std::exception& e) {
      error = "AMQP: " + one_line(e.what());
    }
  }
  if (error.empty()) {
    if (reconnect_attempt_ > 0 || !last_connect_error_.empty())
      spdlog::info("connected again to PostgreSQL {} and AMQP {}", store_.endpoint(), amqp_.endpoint());
    else
      spdlog::info("connected to PostgreSQL {} and AMQP {}", store_.endpoint(), amqp_.endpoint());
    reconnect_attempt_ = 0;
    last_connect_error_.clear();
    return true;
  }
  if (error != last_connect_error_) spdlog::warn("cannot connect, will retry: {}", error);
  last_connect_error_ = error;
  idle_wait(reconnect_backoff_.delay(++reconnect_attempt_));
  return false;
}

std::size_t RelayLoop::run_batch() {
  std::vector<ClaimedRow> rows;
  try {
    const auto t0 = Clock::now();
    pqxx::work tx(store_.connection());
    rows = store_.claim(tx, config_.relay.batch_size);
    metrics_->claimed(rows.size(), seconds_since(t0));
    if (rows.empty()) {
      tx.commit();
      return 0;
    }
    const auto t1 = Clock::now();
    publish_all(rows);
    const auto t2 = Clock::now();
    std::vector<std::int64_t> acked;
    std::vector<FailedRow> failed;
    settle(rows, acked, failed);
    store_.mark_published(tx, acked);
    store_.mark_failed(tx, failed, config_.relay.max_attempts);
    commit_batch(tx, acked.size(), failed.size());
    metrics_->marked(seconds_since(t2));
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    spdlog::debug("batch of {}: claim {:.1f} ms, publish+confirm {:.1f} ms, mark+commit {:.1f} ms",
                  rows.size(), ms(t0, t1), ms(t1, t2), ms(t2, Clock::now()));
  } catch (const pqxx::broken_connection& e) {
    spdlog::warn("PostgreSQL connection lost during a batch of {} rows; they stay pending and "
                 "may be published again: {}", rows.size(), one_line(e.what()));
    store_.disconnect();
  } catch (const pqxx::sql_error& e) {
    spdlog::error("batch of {} rows rolled back (SQLSTATE {}): {}", rows.size(), e.sqlstate(),
                  one_line(e.what()));
    if (!store_.connected()) store_.disconnect();
  }
  return rows.size();
}

void RelayLoop::commit_batch(pqxx::work& tx, std::size_t acked, std::size_t failed) {
  try {
    tx.commit();
  } catch (const pqxx::in_doubt_error& e) {
    ++counters_.commit_unknown;
    metrics_->commit_unknown();
    spdlog::error("commit outcome unknown for a batch of {} acked rows; they may be published "
                  "again: {}", acked, one_line(e.what()));
    store_.disconnect();
    return;
  }
  ++counters_.batches;
  counters_.published += acked;
  counters_.failed += failed;
  metrics_->committed(acked, failed);
  spdlog::debug("batch committed: {} published, {} failed", acked, failed);
}

void RelayLoop::publish_all(std::vector<ClaimedRow>& rows) {
  tracker_.reset(rows.size());
  metrics_->on_channel_reset();
  channel_failure_.clear();
  connection_lost_ = false;
  const auto timeout = milliseconds(config_.amqp.confirm_timeout_ms);
  const std::size_t window = static_cast<std::size_t>(config_.amqp.publish_window);
  for (std::size_t i = 0; i < rows.size() && !connection_lost_; ++i) {
    while (tracker_.outstanding() >= window && !connection_lost_)
      if (!wait_for_event(timeout)) break;
    if (connection_lost_ || tracker_.outstanding() >= window) break;
    const auto& row = rows[i];
    OutboundMessage m{row.id, &row.message_id, &row.exchange, &row.routing_key, &row.type,
                      &row.content_type, row.correlation_id ? &*row.correlation_id : nullptr,
                      &row.headers, &row.payload, row.created_unix_s};
    try {
      const auto tag = amqp_.publish(m);
      tracker_.on_published(i, tag, row.message_id);
      metrics_->on_published(tag);
    } catch (const AmqpError& e) {
      tracker_.fail_outstanding(one_line(e.what()));
      connection_lost_ = true;
      break;
    }
    if (i % 64 == 63)  // read acks as they come, so the socket never backs up
      while (wait_for_event(milliseconds(0))) {}
  }
  while (tracker_.outstanding() > 0 && !connection_lost_)
    if (!wait_for_event(timeout)) break;
  if (tracker_.outstanding() > 0) {
    // No confirm within the timeout: late acks would be ambiguous, so start over
    // on a fresh connection; the rows stay pending.
    tracker_.fail_outstanding("no broker confirm within amqp.confirm_timeout_ms (" +
                              std::to_string(config_.amqp.confirm_timeout_ms) + " ms)");
    spdlog::warn("confirm timeout at {}; reconnecting", amqp_.endpoint());
    amqp_.disconnect();
  }
}

// Handles at most one broker event; false when none came within `timeout`.
bool RelayLoop::wait_for_event(milliseconds timeout) {
  auto ev = amqp_.next_event(timeout);
  if (!ev) return false;
  switch (ev->kind) {
    case BrokerEvent::Kind::kAck:
      tracker_.on_ack(ev->tag, ev->multiple);
      metrics_->on_acked(ev->tag, ev->multiple);
      break;
    case BrokerEvent::Kind::kNack:
      tracker_.on_nack(ev->tag, ev->multiple, ev->reason);
      metrics_->on_unconfirmed(ev->tag, ev->multiple);
      break;
    case BrokerEvent::Kind::kReturn: tracker_.on_return(ev->message_id, ev->reason); break;
    case BrokerEvent::Kind::kChannelClosed:
      spdlog::warn("AMQP {}; channel reopened", ev->reason);
      channel_failure_ = ev->reason;
      tracker_.fail_outstanding(ev->reason);
      metrics_->on_channel_reset();
      break;
    case BrokerEvent::Kind::kConnectionClosed:
      spdlog::warn("AMQP {}", ev->reason);
      tracker_.fail_outstanding(ev->reason);
      metrics_->on_channel_reset();
      connection_lost_ = true;
      break;
  }
  return true;
}

// Splits the batch by outcome. Only failures that belong to the message (nack,
// return, a channel closed over its exchange) count as an attempt; a lost
// connection or a timeout says nothing about the message and must not park it.
void RelayLoop::settle(const std::vector<ClaimedRow>& rows, std::vector<std::int64_t>& acked,
                       std::vector<FailedRow>& failed) {
  using Outcome = ConfirmTracker::Outcome;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    Outcome outcome = tracker_.outcome(i);
    if (outcome == Outcome::kAcked) {
      acked.push_back(row.id);
      metrics_->enqueue_to_confirm(std::chrono::duration<double>(
          std::chrono::system_clock::now().time_since_epoch()).count() - row.created_unix);
      continue;
    }
    const bool channel = outcome == Outcome::kFailed && !channel_failure_.empty() &&
                         tracker_.reason(i) == channel_failure_;
    bool counts = outcome == Outcome::kNacked || outcome == Outcome::kReturned ||
                  (channel && channel_failure_.find("'" + row.exchange + "'") != std::string::npos);
    metrics_->failure(failure_reason(outcome, tracker_.reason(i), channel));
    std::string reason = tracker_.reason(i).empty() ? "not published: connection lost before publish"
                                                   : tracker_.reason(i);
    FailedRow f{row.id, one_line(reason), 0, counts};
    if (counts) {
      f.retry_in_ms = backoff_.delay(row.attempts + 1).count();
      if (row.attempts + 1 >= config_.relay.max_attempts) {
        ++counters_.parked;
        metrics_->parked();
        spdlog::warn("row {} (message {}) parked after {} attempts: {}", row.id, row.message_id,
                     row.attempts + 1, f.error);
      }
    }
    failed.push_back(std::move(f));
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
  double rate = elapsed > 0 ? (counters_.published - published_at_last_summary_) / elapsed : 0;
  last_summary_ = now;
  published_at_last_summary_ = counters_.published;
  PendingStats stats;
  try {
    if (!store_.connected()) throw std::runtime_error("not connected");
    pqxx::read_transaction tx(store_.connection());
    stats = store_.stats(tx);
  } catch (const std::exception& e) {
    spdlog::info("summary: published {} ({:.0f}/s), failed {}, parked {}; pending unknown: {}",
                 counters_.published, rate, counters_.failed, counters_.parked, one_line(e.what()));
    return;
  }
  spdlog::info("summary: published {} ({:.0f}/s), failed {}, pending {}, parked {}, "
               "oldest pending {:.1f} s", counters_.published, rate, counters_.failed,
               stats.pending, stats.parked, stats.oldest_pending_age_s);
}

}  // namespace relay
