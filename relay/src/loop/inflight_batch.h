#pragma once
// InflightBatch: one claimed batch between its claim and its commit.

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "metrics/batch_timeline.h"
#include "pg/batch_store.h"
#include "policy/confirm_tracker.h"
#include "policy/failure_cause.h"
#include "policy/loop_clock.h"

namespace relay {

// The claim's transaction (the store's batch) holds the rows' locks, which are the
// lease, until the batch commits. The relay keeps up to relay.pipeline_depth
// batches in flight, each on its own store, so the next claim and publish overlap
// the broker's confirms of the previous batch.
//
// Owns the batch's publishing state and its changes: rows [0, published()) went to
// the broker (or failed unsent, a row's own fault); once publishing is done no
// more of its rows go out, and the rows never sent stay pending with no attempt.
// Suspects are rows that were outstanding when the broker closed the channel over
// one of them without saying which: published again in halving probe groups
// (BatchPublisher, Isolator) in this same transaction, which still holds their
// locks, until the one at fault closes the channel alone. The batch is settled,
// ready to commit, once publishing is done, nothing is outstanding and no suspect
// is left.
//
// Times come from the injected LoopClock.
// Thread safety: none; the relay loop's thread owns it. REQUIRES: the store and the
// clock outlive it.
class InflightBatch {
 public:
  using Clock = LoopClock::Clock;

  // `rows` just claimed on `store` by a claim that started at `claim_started`
  // (`claim_started_unix` on the wall clock): the tracker is sized for them, the
  // server's idle clock starts now.
  InflightBatch(BatchStore& store, std::vector<ClaimedRow> rows, const LoopClock& clock,
                Clock::time_point claim_started, double claim_started_unix);
  InflightBatch(const InflightBatch&) = delete;
  InflightBatch& operator=(const InflightBatch&) = delete;

  BatchStore& store() const { return store_; }
  std::vector<ClaimedRow>& rows() { return rows_; }
  const std::vector<ClaimedRow>& rows() const { return rows_; }
  ConfirmTracker& tracker() { return tracker_; }
  const ConfirmTracker& tracker() const { return tracker_; }
  BatchTimeline& timeline() { return timeline_; }
  const BatchTimeline& timeline() const { return timeline_; }

  // Publishing in claim order.
  std::size_t published() const { return published_; }
  // A row not yet sent that may still go: next_unsent() is it.
  bool has_unsent() const { return !publishing_done_ && published_ < rows_.size(); }
  std::size_t next_unsent() const { return published_; }
  // next_unsent() went to the broker (its tag is in the tracker) or failed unsent.
  // After the last row, publishing is done.
  void sent_next();
  // next_unsent() cannot be published (its own fault: an attempt); the rows behind go on.
  void unpublishable_next(const std::string& reason);
  // No more rows go out (the link is gone, blocked, or a fetch failed); the unsent
  // rows stay pending, no attempt. Suspects are kept: see drop_suspects().
  void stop_publishing();
  // The batch's time limit stopped its publishing: `why` becomes the reason of the
  // rows it leaves unsent; its suspects are dropped and returned.
  std::deque<std::size_t> withhold(const Failure& why);
  bool publishing_done() const { return publishing_done_; }
  // Something of it may still be published: unsent rows or suspects.
  bool publishing() const { return !publishing_done_ || !suspects_.empty(); }
  // Every row settled: ready to mark and commit.
  bool settled() const { return publishing_done_ && tracker_.outstanding() == 0 && suspects_.empty(); }
  // The link is lost: what is outstanding fails with `failure` (no attempt), nothing
  // more is published, suspects stay pending.
  void lose_link(const Failure& failure);
  // The reason of the rows its time limit left unsent (kNone when none).
  const Failure& withheld() const { return withheld_; }

  // Suspects, in claim order.
  bool has_suspects() const { return !suspects_.empty(); }
  std::size_t next_suspect() const { return suspects_.front(); }
  void pop_suspect() { suspects_.pop_front(); }
  // The outstanding rows become suspects, in front of those not yet probed; returns
  // how many.
  std::size_t suspect_outstanding();
  // The suspects cannot go out on this link: they stay pending (no attempt).
  void drop_suspects() { suspects_.clear(); }

  // The server's idle-in-transaction clock restarts: a statement of the batch's
  // transaction (a payload fetch) just ended. BatchDeadline counts from it.
  void session_used() { session_used_at_ = clock_.now(); }
  Clock::time_point session_used_at() const { return session_used_at_; }
  Clock::time_point claimed_at() const { return claimed_at_; }
  double claim_ms() const { return claim_ms_; }

  // Its claim took every due row it could see (not full, alone, no per_key lanes)
  // while this relay held the listener's lock, so every row committed since
  // notifies: after a clean commit the relay waits for a notification instead of
  // claiming again (RelayLoop::finish_batch).
  bool claimed_all_due = false;

 private:
  void done_publishing();

  BatchStore& store_;
  std::vector<ClaimedRow> rows_;
  const LoopClock& clock_;
  ConfirmTracker tracker_;  // settles this batch's delivery tags only
  BatchTimeline timeline_;  // per row: claimed, published, acked (outbox_relay_stage_seconds)
  std::size_t published_ = 0;
  bool publishing_done_ = false;
  std::deque<std::size_t> suspects_;
  Clock::time_point claimed_at_, session_used_at_;
  double claim_ms_ = 0;
  Failure withheld_;
};

}  // namespace relay
