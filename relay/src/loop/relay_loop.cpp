#include "loop/relay_loop.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>
#include <thread>
#include <utility>

#include "policy/failure_policy.h"
#include "outbox/one_line.h"

namespace relay {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long an idle relay waits for producer transactions still open (that did not
// notify) before it takes the listener's lock; it polls meanwhile if they last.
constexpr milliseconds kArmLockWait{200};

// A relay holding the waiting lock (it alone answers producers' notifications)
// whose oldest batch waits longer than this for its confirms gives the lock back,
// so rows committed meanwhile go to an idle relay. A batch takes milliseconds.
constexpr milliseconds kHolderPatience{250};

// Large payloads are fetched in chunks of at most this many bytes, and each is
// dropped once published: with the claim's inline limit this bounds the memory a
// batch holds, whatever its payload sizes.
constexpr std::size_t kPayloadChunkBytes = 8 * 1024 * 1024;

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
      amqp_(config_.amqp),
      listener_(config_.postgres, kArmLockWait),
      backoff_(config_.relay),
      reconnect_backoff_(reconnect_settings()),
      deadline_(milliseconds(config_.postgres.idle_in_transaction_timeout_ms),
                milliseconds(config_.amqp.confirm_timeout_ms)),
      last_summary_(Clock::now()),
      metrics_(metrics) {
  for (int i = 0; i < config_.relay.pipeline_depth; ++i)
    stores_.push_back(std::make_unique<OutboxStore>(config_.postgres, StoreOptions::of(config_.relay)));
  if (config_.relay.ordering == Ordering::kPerKey)
    lanes_ = std::make_unique<LaneManager>(config_.postgres.schema, config_.relay.lanes);
  if (!metrics_) {  // nobody scrapes: count into a private registry
    own_registry_ = std::make_unique<outbox::metrics::Registry>();
    own_metrics_ = std::make_unique<RelayMetrics>(*own_registry_, "");
    metrics_ = own_metrics_.get();
  }
  cpu_ = std::make_unique<StageCpu>(metrics_->stage_cpu());
}

void RelayLoop::note_state() {
  metrics_->heartbeat();
  metrics_->set_connected(primary().connected(), amqp_.connected(), amqp_.blocked());
  check_stall();
}

int RelayLoop::run(bool exit_when_idle) {
  spdlog::info("relay starting: schema '{}', batch_size {}, pipeline_depth {}, publish_window {}, listen {}",
               config_.postgres.schema, config_.relay.batch_size, config_.relay.pipeline_depth,
               config_.amqp.publish_window, config_.relay.listen);
  const StageCpu::Install cpu(*cpu_);  // run()'s thread is the loop thread
  for (;;) {
    note_state();
    if (inflight_.empty()) {
      if (stop_) break;
      if (!ensure_connected()) continue;
    }
    pump_events();
    enforce_deadlines();
    // One batch at a time, then a new claim: the broker gets the next batch while
    // the other settled one commits, instead of idling through both commits.
    const bool finished = finish_one_settled();
    maybe_log_summary(false);
    if (inflight_.empty() && rebalance_due()) rebalance_lanes();
    if (publish_pending()) continue;
    if (can_claim()) {
      claim_batch(std::exchange(probe_first_, false));
      continue;
    }
    if (finished) continue;  // another may be settled already
    if (!inflight_.empty()) {
      if (listener_.armed() && Clock::now() - inflight_.front()->claimed_at > kHolderPatience)
        give_back_listen_lock();
      await_broker();
      continue;
    }
    if (amqp_.blocked()) {  // a resource alarm: claim nothing until it clears
      last_failure_ = "RabbitMQ " + amqp_.endpoint() + " blocks publishing (resource alarm)";
      give_back_listen_lock();
      idle_wait(milliseconds(config_.relay.poll_interval_ms));
      continue;
    }
    if (held()) {  // backing off after a channel close nobody is to blame for
      give_back_listen_lock();
      idle_wait(std::min(milliseconds(100), std::chrono::duration_cast<milliseconds>(hold_until_ - Clock::now())));
      continue;
    }
    if (exit_when_idle || stop_) break;
    sleep_until_work();
  }
  give_back_listen_lock();  // an idle relay takes over now, not at its fallback poll
  maybe_log_summary(true);
  spdlog::info("relay stopped: {} published, {} failed, {} parked", counters_.published,
               counters_.failed, counters_.parked);
  return 0;
}

// Connects the stores, then the broker, then joins the lanes; stops at the first
// failure and returns it ("" when everything is connected).
std::string RelayLoop::connect_missing() {
  std::string error;
  try {
    for (std::size_t i = 0; i < stores_.size(); ++i) {
      if (stores_[i]->connected()) continue;
      if (i == 0 && lanes_) lanes_->forget();  // the server dropped its locks with the session
      stores_[i]->connect();
      if (i == 0) metrics_->connected_to("postgres");
    }
  } catch (const std::exception& e) {
    error = "PostgreSQL: " + outbox::one_line(e.what());
  }
  if (error.empty()) {
    try {
      if (!amqp_.connected()) {
        amqp_.connect();
        metrics_->connected_to("amqp");
        metrics_->on_channel_reset();  // delivery tags start again from 1
      }
    } catch (const std::exception& e) {
      error = "AMQP: " + outbox::one_line(e.what());
    }
  }
  if (error.empty() && lanes_ && !lanes_->joined()) {
    try {
      lanes_->join(primary().session());
      next_rebalance_ = Clock::now();
      rebalance_lanes();
    } catch (const std::exception& e) {
      error = "PostgreSQL (lanes): " + outbox::one_line(e.what());
      primary().disconnect();
    }
  }
  return error;
}

// Connects what is not connected. REQUIRES: no batch in flight.
bool RelayLoop::ensure_connected() {
  bool all = amqp_.connected();
  for (const auto& s : stores_) all = all && s->connected();
  if (all) return true;
  give_back_listen_lock();  // before a reconnect that may take long
  // A connection lost within a second of being made (a peer that accepts and then
  // drops, a fault that recurs at once) must not turn into a hot reconnect loop.
  if (last_connected_at_ != Clock::time_point{} && Clock::now() - last_connected_at_ < std::chrono::seconds(1)) {
    idle_wait(reconnect_backoff_.delay(++quick_losses_));
  } else {
    quick_losses_ = 0;
  }
  const std::string error = connect_missing();
  if (error.empty()) {
    if (reconnect_attempt_ > 0 || !last_connect_error_.empty())
      spdlog::info("connected again to PostgreSQL {} and AMQP {} after {} failed attempt(s)",
                   primary().endpoint(), amqp_.endpoint(), reconnect_attempt_);
    else
      spdlog::info("connected to PostgreSQL {} and AMQP {}", primary().endpoint(), amqp_.endpoint());
    reconnect_attempt_ = 0;
    last_connect_error_.clear();
    outage_errors_.clear();
    last_claim_empty_ = false;  // rows may have come while disconnected
    last_connected_at_ = Clock::now();
    return true;
  }
  // Each distinct error once per outage (a restarting peer alternates between a
  // few; a new one, such as a certificate refused, still shows), the next line
  // being "connected again"; repeats go to debug.
  if (outage_errors_.size() < 8 && outage_errors_.insert(error).second)
    spdlog::warn("cannot connect, will retry with backoff: {}", error);
  else
    spdlog::debug("still cannot connect: {}", error);
  last_connect_error_ = error;
  idle_wait(reconnect_backoff_.delay(++reconnect_attempt_));
  return false;
}

// Suspects of an isolation first, a probe group at a time; then the batches in
// claim order.
bool RelayLoop::publish_pending() {
  if (held()) return false;
  if (solo_) {
    if (outstanding() > 0) return false;  // wait for the verdict on the probe in flight
    solo_ = false;
  }
  if (isolating()) return publish_probe();
  for (auto& b : inflight_)
    if (!b->publishing_done) return publish_some(*b);
  return false;
}

// Publishes the next probe_size_ suspects (in claim order, across batches) and
// nothing else until the broker settled them: all acked, the group is clean; a
// close, and the culprit is among them (RelayLoop::on_channel_closed halves the
// group). A row refused before goes in a group of its own.
bool RelayLoop::publish_probe() {
  if (outstanding() > 0) return false;
  const StageCpu::Scope cpu(CpuStage::kPublish);
  std::size_t sent = 0;
  amqp_.set_corked(true);
  for (auto& b : inflight_) {
    while (!b->suspects.empty() && sent < probe_size_) {
      const bool alone = must_go_alone(b->rows[b->suspects.front()]);
      if (alone && sent > 0) break;
      if (!publish_suspect(*b)) break;
      ++sent;
      if (alone) probe_size_ = 1;
    }
    if (sent >= probe_size_) break;
  }
  amqp_.set_corked(false);
  solo_ = sent > 0;
  return sent > 0;
}

// Publishes the batch's next rows while the window has room. Returns whether any
// went out.
bool RelayLoop::publish_some(InflightBatch& b) {
  const StageCpu::Scope cpu(CpuStage::kPublish);  // acks read meanwhile go to kSettle
  const auto window = static_cast<std::size_t>(config_.amqp.publish_window);
  std::size_t sent = 0;
  // Full TCP segments: fewer sends for the relay, fewer receives for the broker. A
  // lone message needs no cork (rabbitmq-c sends its frames with MSG_MORE but the
  // last); corking it would cost two system calls for nothing.
  const bool cork = b.rows.size() - b.published > 1;
  if (cork) amqp_.set_corked(true);
  while (b.published < b.rows.size() && !b.publishing_done) {
    if (solo_ || isolating()) break;  // a channel close came in meanwhile: suspects first
    // A blocked connection (resource alarm) is not read by the broker: publish no
    // more; the rest of the batch stays pending without counting an attempt.
    if (!amqp_.connected() || amqp_.blocked()) {
      b.publishing_done = true;
      break;
    }
    if (outstanding() >= window) break;  // await_broker() waits for acks
    auto& row = b.rows[b.published];
    if (!window_has_room_for(row.payload_bytes)) break;
    if (row.invalid) {  // cannot be decoded: its own attempt; the rows behind it go on
      b.tracker.on_unpublishable(b.published++, *row.invalid);
      continue;
    }
    // A row that closed the channel before goes alone, once all else is settled.
    if (must_go_alone(row) && outstanding() > 0) break;
    if (!row.payload_loaded && !load_payloads(b)) break;
    if (!publish_row(b, b.published)) break;
    ++b.published;
    if (row.refused_before) {
      solo_ = true;
      break;
    }
    if (++sent % 64 == 0) pump_events();  // read acks as they come, so the socket never backs up
  }
  if (cork) amqp_.set_corked(false);  // flush before anything waits for the broker
  if (b.published == b.rows.size()) b.publishing_done = true;
  if (b.publishing_done && b.publish_done_at == Clock::time_point{}) b.publish_done_at = Clock::now();
  return sent > 0 || solo_;
}

// Publishes the batch's next suspect. REQUIRES: b.suspects not empty. False when
// it cannot go out on this link: the batch's suspects then stay pending (no attempt).
bool RelayLoop::publish_suspect(InflightBatch& b) {
  if (!amqp_.connected() || amqp_.blocked()) {  // not on this link: pending, no attempt
    b.suspects.clear();
    b.publishing_done = true;
    return false;
  }
  const std::size_t i = b.suspects.front();
  b.suspects.pop_front();
  if (!b.rows[i].payload_loaded) {
    try {
      b.store->load_payloads(*b.tx, b.rows, i, 1);
      b.session_used_at = Clock::now();
    } catch (const std::exception& e) {
      // The session is gone or failing: the suspects stay pending (no attempt).
      spdlog::error("fetching a payload to publish alone failed: {}", outbox::one_line(e.what()));
      b.suspects.clear();
      b.publishing_done = true;
      return false;
    }
  }
  return publish_row(b, i);
}

// Publishes row `i` of the batch and drops its payload. False when the connection
// is lost (every batch then stops publishing).
bool RelayLoop::publish_row(InflightBatch& b, std::size_t i) {
  auto& row = b.rows[i];
  OutboundMessage m{row.id, &row.message_id, &row.exchange, &row.routing_key, &row.type,
                    &row.content_type, row.correlation_id ? &*row.correlation_id : nullptr,
                    &row.headers, &row.payload, row.created_unix_s};
  try {
    const auto tag = amqp_.publish(m);
    b.tracker.on_published(i, tag, row.message_id, row.payload_bytes);
    metrics_->on_published(tag);
  } catch (const UnpublishableMessage& e) {
    // The row's own fault, nothing sent: an attempt for it; the rows behind it go on.
    b.tracker.on_unpublishable(i, "not publishable: " + outbox::one_line(e.what()));
  } catch (const UnencodableMessage& e) {
    // Its own fault too, but the client may have sent part of it: the connection
    // goes, and what else was outstanding is published again (no attempt).
    b.tracker.on_unpublishable(i, "not publishable: " + outbox::one_line(e.what()));
    connection_lost("connection dropped after a message the AMQP client could not encode");
    return false;
  } catch (const AmqpError& e) {  // the socket failed (or the broker read nothing for confirm_timeout_ms)
    spdlog::warn("AMQP connection lost while publishing: {}; the unconfirmed rows stay pending and are "
                 "published again", outbox::one_line(e.what()));
    connection_lost(outbox::one_line(e.what()));
    return false;
  }
  std::string().swap(row.payload);  // sent: keep only what settling needs
  row.payload_loaded = false;       // a suspect fetches it again
  b.timeline.published(i, Clock::now());
  return true;
}

// Fetches the next large payloads of the batch, at most kPayloadChunkBytes at a
// time. On a database error the rest of the batch is not published (it stays
// pending, without an attempt) and finishing the batch meets the same error.
bool RelayLoop::load_payloads(InflightBatch& b) {
  try {
    b.store->load_payloads(*b.tx, b.rows, b.published, kPayloadChunkBytes);
    b.session_used_at = Clock::now();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("fetching payloads of a batch of {} rows failed: {}", b.rows.size(), outbox::one_line(e.what()));
    b.publishing_done = true;
    return false;
  }
}

bool RelayLoop::isolating() const {
  for (const auto& b : inflight_)
    if (!b->suspects.empty()) return true;
  return false;
}

std::size_t RelayLoop::outstanding() const {
  std::size_t n = 0;
  for (const auto& b : inflight_) n += b->tracker.outstanding();
  return n;
}

// amqp.publish_window_bytes: room for `bytes` more beside what is unconfirmed; a
// message larger than the whole window goes once nothing else is outstanding.
bool RelayLoop::window_has_room_for(std::size_t bytes) const {
  std::size_t unconfirmed = 0;
  for (const auto& b : inflight_) unconfirmed += b->tracker.outstanding_bytes();
  return unconfirmed == 0 || unconfirmed + bytes <= static_cast<std::size_t>(config_.amqp.publish_window_bytes);
}

// Reads what the broker sent, without waiting. Called on every turn of the loop:
// when nothing came (the common case at a low rate) it costs one poll(), not the
// library's receive and poll and the stage's two clock reads (system calls all).
void RelayLoop::pump_events() {
  if (!amqp_.readable_now()) return;
  const StageCpu::Scope cpu(CpuStage::kSettle);  // one scope for all the events read: a clock read is a syscall
  while (amqp_.connected() && wait_for_event(milliseconds(0))) {}
}

// Waits for the broker while batches are in flight. Each delivery tag has
// amqp.confirm_timeout_ms from its own publish: acks of other rows do not extend
// it, so one row a queue never confirms cannot hold its batch (and its row locks)
// open for ever.
void RelayLoop::await_broker() {
  const StageCpu::Scope cpu(CpuStage::kSettle);
  const auto oldest = oldest_unconfirmed();
  if (!oldest) {  // nothing to confirm: waiting out a hold or an alarm
    wait_for_event(milliseconds(100));
    return;
  }
  const milliseconds timeout(config_.amqp.confirm_timeout_ms);
  const auto left = std::chrono::duration_cast<milliseconds>(*oldest + timeout - Clock::now());
  if (left > milliseconds(0)) {
    wait_for_event(std::min(left, milliseconds(100)));  // slices keep /healthz fed
    return;
  }
  if (amqp_.blocked()) {
    // The broker blocked the connection (resource alarm) and reads nothing until it
    // unblocks. Keep the connection: tags only grow on the channel, so a late
    // ack settles nothing of a later batch; run() claims nothing while blocked.
    for (auto& b : inflight_) {
      b->tracker.fail_outstanding({FailureCause::kBrokerBlocked, "not confirmed: broker blocked publishing (resource alarm)"});
      b->publishing_done = true;
    }
    return;
  }
  if (Clock::now() - last_broker_event_ < timeout) {  // it confirms others: not hung
    fail_overdue(timeout);
    return;
  }
  // Nothing at all from the broker within the timeout: it may hang, so start over
  // on a fresh connection; the rows stay pending.
  connection_lost("no broker confirm within amqp.confirm_timeout_ms (" +
                  std::to_string(config_.amqp.confirm_timeout_ms) + " ms)");
  spdlog::warn("confirm timeout at {}; reconnecting", amqp_.endpoint());
  amqp_.disconnect();
}

// Every batch in flight loses what is outstanding and publishes no more.
void RelayLoop::connection_lost(const std::string& reason) {
  for (auto& b : inflight_) {
    b->tracker.fail_outstanding({FailureCause::kLinkLost, reason});
    b->publishing_done = true;
    b->suspects.clear();  // not published again on this link: pending, no attempt
  }
  solo_ = false;
  last_failure_ = reason;
  metrics_->on_channel_reset();
}

// Handles at most one broker event; false when none came within `timeout`. Tags
// are unique on the channel, so each batch's tracker settles only its own. Its
// callers charge its CPU to CpuStage::kSettle.
bool RelayLoop::wait_for_event(milliseconds timeout) {
  auto ev = amqp_.next_event(timeout);
  if (!ev) return false;
  last_broker_event_ = Clock::now();
  switch (ev->kind) {
    case BrokerEvent::Kind::kAck:
      for (auto& b : inflight_) {
        acked_rows_.clear();
        b->tracker.on_ack(ev->tag, ev->multiple, &acked_rows_);
        for (const auto row : acked_rows_) b->timeline.acked(row, last_broker_event_);
      }
      metrics_->on_acked(ev->tag, ev->multiple);
      environment_closes_ = 0;
      break;
    case BrokerEvent::Kind::kNack:
      for (auto& b : inflight_) b->tracker.on_nack(ev->tag, ev->multiple, ev->reason);
      metrics_->on_unconfirmed(ev->tag, ev->multiple);
      break;
    case BrokerEvent::Kind::kReturn:
      for (auto& b : inflight_) b->tracker.on_return(ev->message_id, ev->reason);
      break;
    case BrokerEvent::Kind::kChannelClosed:
      on_channel_closed(*ev);
      break;
    case BrokerEvent::Kind::kConnectionClosed:
      spdlog::warn("AMQP {}", ev->reason);
      connection_lost(ev->reason);
      break;
  }
  return true;
}

// Marks and commits the oldest batch whose rows are all settled; false if none is.
bool RelayLoop::finish_one_settled() {
  for (std::size_t i = 0; i < inflight_.size(); ++i) {
    auto& b = *inflight_[i];
    if (!b.publishing_done || b.tracker.outstanding() > 0 || !b.suspects.empty()) continue;
    finish_batch(b);
    inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  return false;
}

void RelayLoop::finish_batch(InflightBatch& b) {
  const auto t2 = Clock::now();
  try {
    std::vector<const ClaimedRow*> acked;
    std::vector<FailedRow> failed;
    {
      const StageCpu::Scope cpu(CpuStage::kSettle);
      settle(b, acked, failed);
    }
    {
      const StageCpu::Scope cpu(CpuStage::kMark);
      if (!commit_batch(b, acked, failed)) return;
    }
    observe_stages(b);
    if (!acked.empty()) note_progress();
    // Still armed since that claim: a row committed after it has notified (the
    // wait sees it at once), and every earlier due row was in it. The claim that
    // would follow is a round trip that finds nothing, at a low rate.
    if (b.claimed_all_due && failed.empty() && listener_.armed()) last_claim_empty_ = true;
    note_retries(failed);
    metrics_->marked(seconds_since(t2));
    auto ms = [](auto a, auto z) { return std::chrono::duration<double, std::milli>(z - a).count(); };
    spdlog::debug("batch of {}: claim {:.1f} ms, publish+confirm {:.1f} ms, mark+commit {:.1f} ms",
                  b.rows.size(), b.claim_ms, ms(b.claimed_at, t2), ms(t2, Clock::now()));
    return;
  } catch (const pqxx::broken_connection& e) {
    spdlog::warn("PostgreSQL connection lost during a batch of {} rows; they stay pending and "
                 "may be published again: {}", b.rows.size(), outbox::one_line(e.what()));
  } catch (const pqxx::sql_error& e) {
    // The rows stay pending, acked or not, and are claimed again: at once, that
    // would publish them again and again as fast as the broker acks. So claims
    // pause, longer at each rollback in a row, as after a fault of the broker's.
    last_failure_ = "the mark of rows " + std::to_string(b.rows.front().id) + ".." +
                    std::to_string(b.rows.back().id) + " rolled back (SQLSTATE " + e.sqlstate() +
                    "): " + outbox::one_line(e.what());
    hold_publishing("batch of " + std::to_string(b.rows.size()) + " rows not marked: " + last_failure_ +
                        "; they stay pending and will be published again",
                    ++rollbacks_in_a_row_);
    if (b.store->connected()) {
      b.tx.reset();
      return;
    }
  } catch (const std::exception& e) {
    // Nothing may end the relay: drop the session (the rows stay pending) and pause
    // claims, longer at each such failure in a row, so a fault that repeats does not
    // spin. A hold, not a sleep: the other batch in flight still reads its confirms.
    last_failure_ = "batch of rows " + std::to_string(b.rows.front().id) + ".." + std::to_string(b.rows.back().id) +
                    " abandoned: " + outbox::one_line(e.what());
    hold_publishing(last_failure_ + "; they stay pending and may be published again", ++rollbacks_in_a_row_);
    b.tx.reset();
    b.store->disconnect();
    return;
  }
  b.tx.reset();  // before its connection goes
  b.store->disconnect();
}

// Marks the batch's rows and commits: with no failures (the common case) the mark
// and COMMIT travel together, one round trip (OutboxStore::mark_published_and_commit).
bool RelayLoop::commit_batch(InflightBatch& b, const std::vector<const ClaimedRow*>& acked_rows,
                             const std::vector<FailedRow>& failed_rows) {
  const std::size_t acked = acked_rows.size(), failed = failed_rows.size();
  try {
    if (failed_rows.empty()) {
      b.store->mark_published_and_commit(*b.tx, acked_rows);
    } else {
      b.store->mark_published(*b.tx, acked_rows);
      b.store->mark_failed(*b.tx, failed_rows, config_.relay.max_attempts);
      b.tx->commit();
    }
  } catch (const pqxx::in_doubt_error& e) {
    ++counters_.commit_unknown;
    metrics_->commit_unknown();
    spdlog::error("commit outcome unknown for a batch of {} acked rows; they may be published "
                  "again: {}", acked, outbox::one_line(e.what()));
    b.tx.reset();
    b.store->disconnect();
    return false;
  }
  rollbacks_in_a_row_ = 0;
  ++counters_.batches;
  counters_.published += acked;
  counters_.failed += failed;
  metrics_->committed(acked, failed);
  spdlog::debug("batch committed: {} published, {} failed", acked, failed);
  return true;
}

}  // namespace relay
