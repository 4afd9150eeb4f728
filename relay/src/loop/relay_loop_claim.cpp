// The relay loop's claim: which session claims, when, and which rows (see
// relay_loop.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <pqxx/pqxx>

#include "outbox/one_line.h"
#include "loop/relay_loop.h"

namespace relay {
namespace {

// A batch whose confirms take longer than this is not the common case (they take
// milliseconds): a queue that cannot confirm one of its rows, say. Meanwhile the
// relay claims the rows behind it, at most once per this interval.
constexpr std::chrono::milliseconds kSlowConfirms{250};

}  // namespace

OutboxStore* RelayLoop::free_store() {
  for (const auto& s : stores_) {
    if (!s->connected()) continue;
    bool busy = false;
    for (const auto& b : inflight_) busy = busy || b->store == s.get();
    if (!busy) return s.get();
  }
  return nullptr;
}

// Claims while nothing is in flight unless the last claim found nothing; claims a
// further batch behind a full one (a backlog), or behind one whose confirms are
// slow, once everything in flight is published and the window has room.
bool RelayLoop::can_claim() {
  if (stop_ || amqp_.blocked() || !amqp_.connected() || held() || solo_) return false;
  if (lanes_ && (!lanes_->joined() || lanes_->owned().empty())) return false;
  if (inflight_.empty()) return !last_claim_empty_ && free_store();
  // Lanes move only between batches: let the batches in flight finish first.
  if (rebalance_due() || inflight_.size() >= stores_.size()) return false;
  if (caught_up_) {  // a claim now would find little, unless the batch in flight is slow
    const auto now = Clock::now();
    if (now - inflight_.front()->claimed_at < kSlowConfirms || now - last_claim_at_ < kSlowConfirms) return false;
  }
  for (const auto& b : inflight_)
    if (!b->publishing_done || !b->suspects.empty()) return false;
  return outstanding() < static_cast<std::size_t>(config_.amqp.publish_window) && window_has_room_for(0) &&
         free_store();
}

std::size_t RelayLoop::claim_batch(bool probe_first) {
  OutboxStore* store = free_store();
  auto batch = std::make_unique<InflightBatch>();
  batch->store = store;
  const int limit = config_.relay.batch_size;
  const auto t0 = Clock::now();
  last_claim_at_ = t0;
  batch->timeline.claim_started(
      t0, std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  try {
    const StageCpu::Scope cpu(CpuStage::kClaim);
    if (probe_first && !store->has_due_rows()) {
      metrics_->probed();  // an idle relay stays ready: it checked, and nothing is due
      judge_lock_holder({});
      last_claim_empty_ = true;
      arm_policy_.release_after_claim(0, Clock::now());
      return 0;
    }
    batch->tx = std::make_unique<BatchTransaction>(store->session());
    batch->rows = claim_rows(*store, *batch->tx, limit);
    floor_policy_.claimed(batch->rows.size(), static_cast<std::size_t>(limit));
    // Invariant: rows come only from a claim, which begins the transaction (their locks).
    if (!batch->rows.empty() && !batch->tx->begun()) throw std::logic_error("rows claimed outside a transaction");
    metrics_->claimed(batch->rows.size(), seconds_since(t0));
    if (batch->rows.empty()) batch->tx->commit();
  } catch (const std::exception& e) {
    const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
    spdlog::error("claim failed{}: {}", sql ? " (SQLSTATE " + sql->sqlstate() + ")" : std::string(),
                  outbox::one_line(e.what()));
    batch->tx.reset();
    floor_policy_.claimed(0, static_cast<std::size_t>(limit));
    // 25006 read_only_sql_transaction: this server is a standby now (a demoted
    // primary, or a DSN without target_session_attrs=read-write). A new session
    // lets libpq find the primary; the reconnect backs off.
    if (!sql || !store->connected() || sql->sqlstate() == "25006") store->disconnect();
    give_back_listen_lock();
    polled_as_bystander_ = woke_on_notification_ = false;  // no verdict on the holder
    last_claim_empty_ = true;  // sleep a poll interval rather than spin on a fault
    return 0;
  }
  const std::size_t n = batch->rows.size();
  judge_lock_holder(batch->rows);
  last_claim_empty_ = n == 0;
  const bool release_lock = arm_policy_.release_after_claim(n, Clock::now());
  caught_up_ = n < static_cast<std::size_t>(limit);
  if (n == 0) return 0;
  batch->claimed_all_due = caught_up_ && inflight_.empty() && !lanes_ && listener_.armed() && !release_lock;
  batch->claimed_at = batch->session_used_at = Clock::now();
  batch->claim_ms = std::chrono::duration<double, std::milli>(batch->claimed_at - t0).count();
  batch->timeline.claimed(n, batch->claimed_at);
  batch->tracker.reset(n);
  inflight_.push_back(std::move(batch));
  publish_some(*inflight_.back());
  // Busy: producers need not notify any more, and an idle relay, woken by the
  // handover, claims beside this one.
  if (release_lock) give_back_listen_lock();
  return n;
}

// A claim behind batches in flight (a backlog: see can_claim) leaves out their id
// range rather than visit each of their locked rows again (OutboxStore::claim_around),
// and deep in a backlog mostly starts above it (ClaimFloorPolicy).
std::vector<ClaimedRow> RelayLoop::claim_rows(OutboxStore& store, BatchTransaction& tx, int limit) {
  if (lanes_) return store.claim_key_heads(tx, limit, lanes_->owned(), key_cursor_);
  std::int64_t from = std::numeric_limits<std::int64_t>::max(), to = std::numeric_limits<std::int64_t>::min();
  for (const auto& b : inflight_)
    for (const auto& row : b->rows) {
      from = std::min(from, row.id);
      to = std::max(to, row.id);
    }
  switch (floor_policy_.next_claim(from <= to)) {
    case ClaimFloorPolicy::Start::kAboveRange:
      return store.claim_above(tx, limit, to);
    case ClaimFloorPolicy::Start::kAroundRange:
      return store.claim_around(tx, limit, from, to);
    case ClaimFloorPolicy::Start::kLowest:
      break;
  }
  return store.claim(tx, limit);
}

}  // namespace relay
