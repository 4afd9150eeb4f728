#pragma once
// InflightBatch: one claimed batch between its claim and its commit.

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "metrics/batch_timeline.h"
#include "pg/batch_transaction.h"
#include "pg/outbox_store.h"
#include "policy/confirm_tracker.h"
#include "policy/failure_cause.h"

namespace relay {

// The claim transaction (on the connection of the store that claimed it) holds the
// rows' locks, which are the lease, until the batch commits. The relay keeps up to
// relay.pipeline_depth batches in flight, each on its own connection (a libpqxx
// connection runs one transaction at a time), so the next claim and publish overlap
// the broker's confirms of the previous batch.
//
// Plain data owned by the relay loop's thread.
struct InflightBatch {
  OutboxStore* store = nullptr;
  std::unique_ptr<BatchTransaction> tx;
  std::vector<ClaimedRow> rows;
  ConfirmTracker tracker;        // settles this batch's delivery tags only
  BatchTimeline timeline;        // per row: claimed, published, acked (outbox_relay_stage_seconds)
  std::size_t published = 0;     // rows [0, published) went to the broker
  bool publishing_done = false;  // no more of its rows will be published
  // Rows that were outstanding when the broker closed the channel over one of them,
  // not saying which: published again in halving probe groups (BatchPublisher::publish_pending, Isolator) in
  // this same transaction, which still holds their locks, until the one at fault
  // closes the channel alone. The batch commits only once this is empty.
  std::deque<std::size_t> suspects;
  // Its claim took every due row it could see (not full, alone, no per_key lanes) while
  // this relay held the listener's lock, so every row committed since notifies:
  // after a clean commit the relay waits for a notification instead of claiming
  // again (RelayLoop::finish_batch).
  bool claimed_all_due = false;
  std::chrono::steady_clock::time_point claimed_at, publish_done_at;
  // When its transaction's last statement (the claim, a payload fetch) ended: the
  // server's idle-in-transaction clock starts there (BatchDeadline counts from it).
  std::chrono::steady_clock::time_point session_used_at;
  // Set when its BatchDeadline stopped its publishing: the reason of the rows it
  // left unpublished (they stay pending, no attempt).
  Failure withheld;
  double claim_ms = 0;
};

}  // namespace relay
