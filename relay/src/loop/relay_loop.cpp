#include "loop/relay_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "outbox/one_line.h"
#include "pg/pg_error.h"

namespace relay {
namespace {

using Clock = LoopClock::Clock;
using std::chrono::milliseconds;

// A relay holding the waiting lock (it alone answers producers' notifications)
// whose oldest batch waits longer than this for its confirms gives the lock back,
// so rows committed meanwhile go to an idle relay. A batch takes milliseconds.
constexpr milliseconds kHolderPatience{250};

// A batch whose confirms take longer than this is not the common case (they take
// milliseconds): a queue that cannot confirm one of its rows, say. Meanwhile the
// relay claims the rows behind it, at most once per this interval.
constexpr milliseconds kSlowConfirms{250};

// An idle relay wakes this long after the earliest scheduled row's deliver_at, so
// rows due within it of each other go out in one claim, not one claim each (at
// 1 000 scheduled rows a second, a claim per row would keep a core busy).
constexpr milliseconds kScheduledCoalesce{10};

// "rows 7..12", for logs. REQUIRES: the batch has rows.
std::string rows_of(const InflightBatch& b) {
  return "rows " + std::to_string(b.rows().front().id) + ".." + std::to_string(b.rows().back().id);
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

RelayLoop::RelayLoop(RelayConfig config, RelayLinks links, const std::atomic<bool>& stop, RelayMetrics* metrics)
    : config_(std::move(config)),
      links_(std::move(links)),
      clock_(*links_.clock),
      stop_(stop),
      own_registry_(metrics ? nullptr : std::make_unique<outbox::metrics::Registry>()),
      own_metrics_(metrics ? nullptr : std::make_unique<RelayMetrics>(*own_registry_, "")),
      metrics_(metrics ? *metrics : *own_metrics_),  // nobody scrapes: a private registry
      amqp_(*links_.broker),
      stores_(links_.stores),
      stall_(std::chrono::seconds(config_.relay.stall_after_s), clock_.now()),
      reader_(config_, amqp_, batches_, isolator_, hold_, stall_, metrics_, clock_),
      publisher_(config_.amqp, amqp_, batches_, isolator_, hold_, reader_, metrics_, clock_),
      settler_(config_.relay, metrics_, clock_),
      wake_(config_.relay, amqp_, *links_.listener, metrics_, clock_, stop_, [this] { note_state(); }),
      last_summary_(clock_.now()),
      cpu_(std::make_unique<StageCpu>(metrics_.stage_cpu())) {
  if (stores_.empty()) throw std::invalid_argument("RelayLoop: no store");
  if (config_.relay.ordering == Ordering::kPerKey)
    lanes_ = std::make_unique<LaneManager>(config_.postgres.schema, config_.relay.lanes);
}

int RelayLoop::run(bool exit_when_idle) {
  spdlog::info("relay starting: schema '{}', batch_size {}, pipeline_depth {}, publish_window {}, listen {}",
               config_.postgres.schema, config_.relay.batch_size, config_.relay.pipeline_depth,
               config_.amqp.publish_window, config_.relay.listen);
  const StageCpu::Install cpu(*cpu_);  // run()'s thread is the loop thread
  for (;;) {
    note_state();
    if (batches_.empty()) {
      if (stop_) break;
      if (!ensure_connected()) continue;
    }
    reader_.pump();
    reader_.enforce_deadlines();
    // One batch at a time, then a new claim: the broker gets the next batch while
    // the other settled one commits, instead of idling through both commits.
    const bool finished = finish_one_settled();
    maybe_log_summary(false);
    if (batches_.empty() && rebalance_due()) rebalance_lanes();
    if (publisher_.publish_pending()) continue;
    if (can_claim()) {
      claim_batch(std::exchange(probe_first_, false));
      continue;
    }
    if (finished) continue;  // another may be settled already
    if (!batches_.empty()) {
      if (wake_.armed() && clock_.now() - batches_.front().claimed_at() > kHolderPatience) wake_.give_back();
      reader_.await();
      continue;
    }
    if (amqp_.blocked()) {  // a resource alarm: claim nothing until it clears
      stall_.failure("RabbitMQ " + amqp_.endpoint() + " blocks publishing (resource alarm)", clock_.now());
      wake_.give_back();
      wake_.pause(milliseconds(config_.relay.poll_interval_ms));
      continue;
    }
    if (hold_.held(clock_.now())) {  // backing off after a fault nobody is to blame for
      wake_.give_back();
      wake_.pause(std::min(milliseconds(100), std::chrono::duration_cast<milliseconds>(hold_.until() - clock_.now())));
      continue;
    }
    if (exit_when_idle || stop_) break;
    // A link lost while idle: reconnect now (ensure_connected paces the attempts), not
    // after a sleep that only a producer's notification or the fallback poll ends.
    if (!amqp_.connected() || !primary().connected()) continue;
    sleep_until_work();
  }
  wake_.give_back();  // an idle relay takes over now, not at its fallback poll
  maybe_log_summary(true);
  spdlog::info("relay stopped: {} published, {} failed, {} parked", counters_.published, counters_.failed,
               counters_.parked);
  return 0;
}

void RelayLoop::note_state() {
  metrics_.heartbeat();
  metrics_.set_connected(primary().connected(), amqp_.connected(), amqp_.blocked());
  const auto now = clock_.now();
  const auto change = stall_.check(batches_.empty() && last_claim_empty_, now);
  // While a stall lasts /readyz names the failure of now, not of its start.
  if (!change && stall_.stalled()) metrics_.set_stalled(true, stall_.reason(now));
  if (!change) return;
  if (change->stalled) {
    spdlog::warn("{}", change->why);
  } else {
    spdlog::info("publishing resumed after a stall of {} s", change->lasted.count());
  }
  metrics_.set_stalled(change->stalled, change->why);
}

// Connects what is not connected; the waits and log lines are ReconnectSupervisor's.
bool RelayLoop::ensure_connected() {
  bool all = amqp_.connected();
  for (const auto& s : stores_) all = all && s->connected();
  if (all) return true;
  wake_.give_back();  // before a reconnect that may take long
  const auto wait = reconnect_.before_attempt(clock_.now());
  if (wait.count() > 0) wake_.pause(wait);
  const auto error = connect_missing();
  if (!error) {
    spdlog::info("{}", reconnect_.connected("PostgreSQL " + primary().endpoint() + " and AMQP " + amqp_.endpoint(),
                                            clock_.now()));
    last_claim_empty_ = false;  // rows may have come while disconnected
    return true;
  }
  const auto failed = report_connect_failure(reconnect_, metrics_, error->target, error->text, error->kind,
                                             clock_.now());
  wake_.pause(failed.wait);
  return false;
}

// Connects the stores, then the broker, then joins the lanes; stops at the first
// failure and returns it (nullopt when everything is connected).
std::optional<RelayLoop::ConnectError> RelayLoop::connect_missing() {
  try {
    for (std::size_t i = 0; i < stores_.size(); ++i) {
      if (stores_[i]->connected()) continue;
      if (i == 0 && lanes_) lanes_->forget();  // the server dropped its locks with the session
      stores_[i]->connect();
      if (i == 0) metrics_.connected_to("postgres");
    }
  } catch (const std::exception& e) {
    const auto text = outbox::one_line(e.what());
    return ConnectError{ConnectTarget::kPostgres, text, classify_postgres_failure(text)};
  }
  try {
    if (!amqp_.connected()) {
      amqp_.connect();
      metrics_.connected_to("amqp");
      metrics_.on_channel_reset();  // delivery tags start again from 1
    }
  } catch (const outbox::amqp::AmqpError& e) {
    return ConnectError{ConnectTarget::kAmqp, outbox::one_line(e.what()), classify_amqp_failure(e)};
  } catch (const std::exception& e) {
    return ConnectError{ConnectTarget::kAmqp, outbox::one_line(e.what()), ConnectFailure{}};
  }
  if (lanes_ && !lanes_->joined()) {
    try {
      primary().join_lanes(*lanes_);
      next_rebalance_ = clock_.now();
      rebalance_lanes();
    } catch (const std::exception& e) {
      primary().disconnect();
      const auto text = outbox::one_line(e.what());
      return ConnectError{ConnectTarget::kPostgres, "(lanes) " + text, classify_postgres_failure(text)};
    }
  }
  return std::nullopt;
}

BatchStore* RelayLoop::free_store() {
  for (const auto& s : stores_)
    if (s->connected() && !batches_.uses(s.get())) return s.get();
  return nullptr;
}

// Claims while nothing is in flight unless the last claim found nothing; claims a
// further batch behind a full one (a backlog), or behind one whose confirms are
// slow, once everything in flight is published and the window has room.
bool RelayLoop::can_claim() {
  if (stop_ || amqp_.blocked() || !amqp_.connected() || hold_.held(clock_.now()) || isolator_.solo()) return false;
  if (lanes_ && (!lanes_->joined() || lanes_->owned().empty())) return false;
  if (batches_.empty()) return !last_claim_empty_ && free_store();
  // Lanes move only between batches: let the batches in flight finish first.
  if (rebalance_due() || batches_.size() >= stores_.size()) return false;
  if (caught_up_) {  // a claim now would find little, unless the batch in flight is slow
    const auto now = clock_.now();
    if (now - batches_.front().claimed_at() < kSlowConfirms || now - last_claim_at_ < kSlowConfirms) return false;
  }
  if (!batches_.all_published()) return false;
  return batches_.outstanding() < static_cast<std::size_t>(config_.amqp.publish_window) &&
         publisher_.window_has_room_for(0) && free_store();
}

void RelayLoop::claim_batch(bool probe_first) {
  BatchStore* store = free_store();
  const int limit = config_.relay.batch_size;
  const auto t0 = clock_.now();
  const double t0_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  last_claim_at_ = t0;
  std::vector<ClaimedRow> rows;
  try {
    const StageCpu::Scope cpu(CpuStage::kClaim);
    if (probe_first && !store->has_due_rows()) {
      metrics_.probed();  // an idle relay stays ready: it checked, and nothing is due
      wake_.judge_holder({});
      last_claim_empty_ = true;
      wake_.release_after_claim(0, clock_.now());
      return;
    }
    rows = claim_rows(*store, limit);
    floor_policy_.claimed(rows.size(), static_cast<std::size_t>(limit));
    // Invariant: rows come only from a claim, which opens the batch (their locks).
    if (!rows.empty() && !store->in_batch()) throw std::logic_error("rows claimed outside a transaction");
    metrics_.claimed(rows.size(), seconds_between(t0, clock_.now()));
  } catch (const std::exception& e) {
    store->abort_batch();
    floor_policy_.claimed(0, static_cast<std::size_t>(limit));
    claim_failed(*store, e);
    return;
  }
  const std::size_t n = rows.size();
  wake_.judge_holder(rows);
  last_claim_empty_ = n == 0;
  const bool release_lock = wake_.release_after_claim(n, clock_.now());
  caught_up_ = n < static_cast<std::size_t>(limit);
  if (n == 0) return;
  auto batch = std::make_unique<InflightBatch>(*store, std::move(rows), clock_, t0, t0_unix);
  batch->claimed_all_due = caught_up_ && batches_.empty() && !lanes_ && wake_.armed() && !release_lock;
  batches_.push(std::move(batch));
  publisher_.publish_some(batches_.back());
  // Busy: producers need not notify any more, and an idle relay, woken by the
  // handover, claims beside this one.
  if (release_lock) wake_.give_back();
}

void RelayLoop::claim_failed(BatchStore& store, const std::exception& e) {
  const auto* pg = dynamic_cast<const PgError*>(&e);
  const bool refused = pg && pg->kind() == PgError::Kind::kStatement;
  spdlog::error("claim failed{}: {}", refused ? " (SQLSTATE " + pg->sqlstate() + ")" : std::string(),
                outbox::one_line(e.what()));
  // A standby now (a demoted primary, or a DSN without target_session_attrs=read-write):
  // a new session lets libpq find the primary; the reconnect backs off. Anything but a
  // refused statement on a live session: a new session too.
  if (!refused || !store.connected() || pg->on_standby()) store.disconnect();
  wake_.give_back();
  wake_.forget_wake();       // no verdict on the holder
  last_claim_empty_ = true;  // sleep a poll interval rather than spin on a fault
}

// A claim behind batches in flight (a backlog: see can_claim) leaves out their id
// range rather than visit each of their locked rows again (OutboxStore::claim_around),
// and deep in a backlog mostly starts above it (ClaimFloorPolicy).
std::vector<ClaimedRow> RelayLoop::claim_rows(BatchStore& store, int limit) {
  if (lanes_) return store.claim_key_heads(limit, lanes_->owned(), key_cursor_);
  const auto range = batches_.id_range();
  switch (floor_policy_.next_claim(range.has_value())) {
    case ClaimFloorPolicy::Start::kAboveRange: return store.claim_above(limit, range->second);
    case ClaimFloorPolicy::Start::kAroundRange: return store.claim_around(limit, range->first, range->second);
    case ClaimFloorPolicy::Start::kLowest: break;
  }
  return store.claim(limit);
}

// Marks and commits the oldest batch whose rows are all settled; false if none is.
bool RelayLoop::finish_one_settled() {
  const auto batch = batches_.take_settled();
  if (!batch) return false;
  finish_batch(*batch);
  return true;
}

void RelayLoop::finish_batch(InflightBatch& b) {
  const auto t2 = clock_.now();
  try {
    SettledBatch settled;
    {
      const StageCpu::Scope cpu(CpuStage::kSettle);
      // Rows left unsent while the broker blocked the connection, or by the batch's
      // time limit: say so (their metric and last_error), not "connection lost".
      settled = settler_.settle(b, amqp_.blocked()
                                       ? Failure{FailureCause::kBrokerBlocked,
                                                 "not published: broker blocked publishing (resource alarm)"}
                                       : b.withheld());
    }
    counters_.parked += settled.parked;
    if (!settled.last_failure.empty()) stall_.failure(settled.last_failure, clock_.now());
    if (settled.retry_due_until) stall_.retry_scheduled(*settled.retry_due_until);
    {
      const StageCpu::Scope cpu(CpuStage::kMark);
      if (!commit_batch(b, settled)) return;
    }
    settler_.observe_stages(b, clock_.now());
    if (!settled.acked.empty()) stall_.progress(clock_.now());
    // Still armed since that claim: a row committed after it has notified (the wait
    // sees it at once), and every earlier due row was in it. The claim that would
    // follow is a round trip that finds nothing, at a low rate.
    if (b.claimed_all_due && settled.failed.empty() && wake_.armed()) last_claim_empty_ = true;
    note_retries(settled.failed);
    metrics_.marked(seconds_between(t2, clock_.now()));
    auto ms = [](auto a, auto z) { return std::chrono::duration<double, std::milli>(z - a).count(); };
    spdlog::debug("batch of {}: claim {:.1f} ms, publish+confirm {:.1f} ms, mark+commit {:.1f} ms", b.rows().size(),
                  b.claim_ms(), ms(b.claimed_at(), t2), ms(t2, clock_.now()));
  } catch (const PgError& e) {
    if (e.kind() == PgError::Kind::kSessionLost) {
      spdlog::warn(
          "PostgreSQL connection lost during a batch of {} rows; they stay pending and may be published "
          "again: {}",
          b.rows().size(), outbox::one_line(e.what()));
      b.store().disconnect();
      return;
    }
    // The rows stay pending, acked or not, and are claimed again: at once, that would
    // publish them again and again as fast as the broker acks. So claims pause,
    // longer at each rollback in a row, as after a fault of the broker's.
    if (e.kind() == PgError::Kind::kStatement)
      batch_abandoned(b,
                      "the mark of " + rows_of(b) + " rolled back (SQLSTATE " + e.sqlstate() +
                          "): " + outbox::one_line(e.what()),
                      b.store().connected());
    else batch_abandoned(b, "batch of " + rows_of(b) + " abandoned: " + outbox::one_line(e.what()), false);
  } catch (const std::exception& e) {
    // Nothing may end the relay: drop the session (the rows stay pending) and pause
    // claims, longer at each such failure in a row, so a fault that repeats does not
    // spin. A hold, not a sleep: the other batch in flight still reads its confirms.
    batch_abandoned(b, "batch of " + rows_of(b) + " abandoned: " + outbox::one_line(e.what()), false);
  }
}

void RelayLoop::batch_abandoned(InflightBatch& b, const std::string& why, bool keep_session) {
  stall_.failure(why, clock_.now());
  const auto delay = hold_.after_rollback(clock_.now());
  spdlog::warn("{}; the batch's {} rows stay pending and will be published again; publishing paused for {} ms", why,
               b.rows().size(), delay.count());
  b.store().abort_batch();
  if (!keep_session) b.store().disconnect();
}

// Marks the batch's rows and commits: with no failures (the common case) the mark
// and COMMIT travel together, one round trip (BatchStore::commit_batch).
bool RelayLoop::commit_batch(InflightBatch& b, const SettledBatch& settled) {
  const std::size_t acked = settled.acked.size(), failed = settled.failed.size();
  try {
    b.store().commit_batch(settled.acked, settled.failed, config_.relay.max_attempts);
  } catch (const PgError& e) {
    if (e.kind() != PgError::Kind::kInDoubt) throw;
    ++counters_.commit_unknown;
    metrics_.commit_unknown();
    spdlog::error("commit outcome unknown for a batch of {} acked rows; they may be published again: {}", acked,
                  outbox::one_line(e.what()));
    b.store().disconnect();
    return false;
  }
  hold_.committed();
  ++counters_.batches;
  counters_.published += acked;
  counters_.failed += failed;
  metrics_.committed(acked, failed);
  spdlog::debug("batch committed: {} published, {} failed", acked, failed);
  return true;
}

// The relay's own retries wake it when due, so an idle relay needs no fast poll to
// honour its backoff. Rows failed without an attempt are due at once.
void RelayLoop::note_retries(const std::vector<FailedRow>& failed) {
  if (next_retry_at_ && *next_retry_at_ <= clock_.now()) next_retry_at_.reset();  // already due
  for (const auto& f : failed) {
    if (f.retry_in_ms <= 0) {
      last_claim_empty_ = false;
      continue;
    }
    const auto due = clock_.now() + milliseconds(f.retry_in_ms);
    if (!next_retry_at_ || due < *next_retry_at_) next_retry_at_ = due;
  }
}

// Nothing in flight and the last claim found nothing: wait for a notification, the
// fallback poll, this relay's own earliest retry, the earliest scheduled row, a
// rebalance, or stop.
void RelayLoop::sleep_until_work() {
  auto wake_by = Clock::time_point::max();
  if (next_retry_at_) wake_by = *next_retry_at_;
  if (lanes_) wake_by = std::min(wake_by, std::max(next_rebalance_, clock_.now()));
  if (wake_.polling_busy(clock_.now())) {
    // Busy a moment ago: it claims again within a millisecond, due scheduled rows
    // included, so it need not ask when the next one is due.
    wake_.poll_busy(wake_by);
    probe_first_ = false;
  } else {
    if (const auto due = next_scheduled()) wake_by = std::min(wake_by, *due);
    probe_first_ = wake_.sleep(wake_by, lanes_ != nullptr);
  }
  if (next_retry_at_ && clock_.now() >= *next_retry_at_) next_retry_at_.reset();
  last_claim_empty_ = false;
}

// When the earliest scheduled row not yet due is due (plus kScheduledCoalesce). A
// producer that schedules an earlier one notifies, which wakes the relay to ask again.
std::optional<Clock::time_point> RelayLoop::next_scheduled() {
  BatchStore* store = free_store();
  if (!store) return std::nullopt;
  try {
    const auto in = store->next_scheduled_in();
    if (!in) return std::nullopt;
    // A deliver_at in 9999 is further than a steady_clock can add: a day is as good.
    const double s = std::clamp(*in, 0.0, 86400.0);
    return clock_.now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)) +
           kScheduledCoalesce;
  } catch (const std::exception& e) {
    // The next claim finds out what is wrong and reconnects; until then, the poll.
    spdlog::warn("cannot read when the next scheduled row is due, polling: {}", outbox::one_line(e.what()));
    store->disconnect();
    return std::nullopt;
  }
}

// Recounts the live relays and takes or gives up lanes (logged when they move).
void RelayLoop::rebalance_lanes() {
  next_rebalance_ = clock_.now() + milliseconds(config_.relay.rebalance_interval_ms);
  if (!primary().connected() || !lanes_->joined()) return;
  try {
    auto change = primary().rebalance_lanes(*lanes_);
    metrics_.set_lanes_owned(lanes_->owned().size());
    if (!change.taken.empty() || !change.released.empty())
      spdlog::info("lanes: own {} of {} ({} relays, fair share {}): took {}, gave up {}", lanes_->owned().size(),
                   lanes_->lanes(), change.members, change.fair_share, change.taken.size(), change.released.size());
    if (!change.taken.empty()) last_claim_empty_ = false;  // new keys may have work
  } catch (const std::exception& e) {
    spdlog::warn("lane rebalance failed, reconnecting: {}", outbox::one_line(e.what()));
    primary().disconnect();
    lanes_->forget();
    metrics_.set_lanes_owned(0);
  }
}

void RelayLoop::maybe_log_summary(bool force) {
  const auto now = clock_.now();
  const double elapsed = std::chrono::duration<double>(now - last_summary_).count();
  if (!force && elapsed < config_.relay.summary_interval_s) return;
  BatchStore* store = free_store();                   // a session with no claim transaction open
  if (!store && !force && !batches_.empty()) return;  // after the next commit
  const double rate = elapsed > 0 ? (counters_.published - published_at_last_summary_) / elapsed : 0;
  last_summary_ = now;
  published_at_last_summary_ = counters_.published;
  PendingStats stats;
  try {
    if (!store) throw std::runtime_error("not connected");
    stats = store->stats();  // one statement, no BEGIN/COMMIT
  } catch (const std::exception& e) {
    spdlog::info("summary: published {} ({:.0f}/s), failed {}, parked {}; pending unknown: {}", counters_.published,
                 rate, counters_.failed, counters_.parked, outbox::one_line(e.what()));
    return;
  }
  spdlog::info("summary: published {} ({:.0f}/s), failed {}, pending {}, parked {}, oldest pending {:.1f} s",
               counters_.published, rate, counters_.failed, stats.pending, stats.parked, stats.oldest_pending_age_s);
}

}  // namespace relay
