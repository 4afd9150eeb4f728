#pragma once
// BatchPipeline: the batches in flight, in claim order, and what is true of all of them.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loop/inflight_batch.h"
#include "policy/confirm_tracker.h"
#include "policy/failure_cause.h"

namespace relay {

// Up to relay.pipeline_depth batches are in flight, each in its own transaction on
// its own session. Delivery tags are unique on the channel, so a broker event goes
// to every batch and each batch's ConfirmTracker settles only its own rows.
//
// Holds no I/O: the loop publishes, reads the broker and commits; this answers
// what is outstanding, where, and since when. Thread safety: none.
class BatchPipeline {
 public:
  using Clock = std::chrono::steady_clock;
  using Batches = std::vector<std::unique_ptr<InflightBatch>>;

  bool empty() const { return batches_.empty(); }
  std::size_t size() const { return batches_.size(); }
  InflightBatch& front() { return *batches_.front(); }
  InflightBatch& back() { return *batches_.back(); }
  Batches::iterator begin() { return batches_.begin(); }
  Batches::iterator end() { return batches_.end(); }
  Batches::const_iterator begin() const { return batches_.begin(); }
  Batches::const_iterator end() const { return batches_.end(); }

  void push(std::unique_ptr<InflightBatch> batch) { batches_.push_back(std::move(batch)); }
  // The oldest batch whose rows are all settled (published and confirmed, or failed,
  // no suspects left), taken out of the pipeline; null when none is.
  std::unique_ptr<InflightBatch> take_settled();

  bool uses(const BatchStore* store) const;
  // Delivery tags not yet settled, and their payload bytes.
  std::size_t outstanding() const;
  std::size_t outstanding_bytes() const;
  // Some batch has suspects to publish alone.
  bool isolating() const;
  // Every batch has published all it will (suspects included).
  bool all_published() const;
  // The lowest and highest id of the ready rows in flight (scheduled rows left out).
  std::optional<std::pair<std::int64_t, std::int64_t>> id_range() const;
  // When the oldest delivery tag still unconfirmed was published.
  std::optional<Clock::time_point> oldest_unconfirmed() const;

  // Broker events, to every batch. on_ack notes each acked row's time.
  void on_ack(std::uint64_t tag, bool multiple, Clock::time_point at);
  void on_nack(std::uint64_t tag, bool multiple, const std::string& reason);
  void on_return(const std::string& message_id, const std::string& reason);

  // Every batch loses what is outstanding and publishes no more; suspects are not
  // published again on this link (pending, no attempt).
  void lose_link(const Failure& failure);
  // What is outstanding fails with `outcome`; publishing goes on.
  void fail_outstanding(const Failure& failure, ConfirmTracker::Outcome outcome);
  // Rows published at or before `limit` fail (oldest first); returns their tags.
  std::vector<std::uint64_t> fail_published_before(Clock::time_point limit, const Failure& failure);
  // The outstanding rows of every batch go back in front of its suspects, in
  // their order; returns how many.
  std::size_t suspect_outstanding();

 private:
  Batches batches_;
  std::vector<std::size_t> acked_rows_;  // scratch: the rows one ack settled
};

}  // namespace relay
