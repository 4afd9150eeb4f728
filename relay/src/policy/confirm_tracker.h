#pragma once
// ConfirmTracker: which published rows the broker has settled, and how.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/failure_cause.h"

namespace relay {

// Maps delivery tags to the rows of one batch and settles them from the broker's
// acks, nacks and returns. A row counts as published only when the ack for its
// own tag (or a multiple ack covering it) arrived and no basic.return named it.
// Pure bookkeeping: no I/O. Not thread-safe.
class ConfirmTracker {
 public:
  enum class Outcome {
    kUnconfirmed,  // published (or not yet), no ack or nack so far
    kAcked,        // the broker took responsibility: may be marked published
    kNacked,       // refused by the broker
    kReturned,     // unroutable: returned, whatever ack follows
    kFailed,       // channel/connection lost or confirm timeout before settling
    kInvalid,      // never sent: the row cannot be decoded or breaks an AMQP limit (its own fault)
    kRefused,      // published alone, the broker closed the channel over it (its own fault)
    kEnvironment,  // lost with a channel the broker closed for no message's fault
  };

  // Starts a batch of `rows` rows, all unconfirmed.
  void reset(std::size_t rows);
  // Row `row` was published with `tag` under `message_id`, `bytes` of payload: they
  // count in outstanding_bytes() until its tag is settled.
  // REQUIRES: tags increase within a channel.
  void on_published(std::size_t row, std::uint64_t tag, const std::string& message_id, std::size_t bytes = 0);
  // `acked_rows` (may be null) gets the rows this ack settled, for their timing.
  void on_ack(std::uint64_t tag, bool multiple, std::vector<std::size_t>* acked_rows = nullptr);
  void on_nack(std::uint64_t tag, bool multiple, const std::string& reason);
  // basic.return carries no tag: the row is found by message id. Its ack follows.
  void on_return(const std::string& message_id, const std::string& reason);
  // Row `row` was not sent because it cannot be (UnpublishableMessage): it has no tag.
  void on_unpublishable(std::size_t row, const std::string& reason);
  // Settles every outstanding row as failed (channel closed, timeout, lost link).
  // The tag space restarts after a channel reopens, so nothing outstanding survives.
  void fail_outstanding(const Failure& failure, Outcome outcome = Outcome::kFailed);
  // Settles outstanding rows as failed with `reason`, oldest tag first, while
  // `overdue(row)` holds (the broker left them unconfirmed too long while it
  // confirmed others). Their tags stay unknown to the tracker: a late ack or nack
  // settles nothing. Returns their tags.
  std::vector<std::uint64_t> fail_oldest_while(const std::function<bool(std::size_t row)>& overdue,
                                               const Failure& failure);
  // The row of the oldest outstanding tag; npos when none is outstanding.
  std::size_t oldest_outstanding() const;
  // The broker closed the channel over one of the outstanding rows, not saying which:
  // they all go back to kUnconfirmed (to be published again, one at a time) and are
  // returned in row order. A returned row keeps its outcome and is not returned.
  std::vector<std::size_t> take_outstanding();
  // Row `row`, outstanding alone, provoked a channel close: it is settled kRefused.
  void on_refused(std::size_t row, const std::string& reason);
  // The row whose tag is outstanding, when exactly one is; else npos.
  std::size_t sole_outstanding() const;

  std::size_t outstanding() const { return by_tag_.size(); }
  // Payload bytes of the outstanding rows (amqp.publish_window_bytes).
  std::size_t outstanding_bytes() const { return outstanding_bytes_; }
  Outcome outcome(std::size_t row) const { return rows_[row].outcome; }
  const std::string& reason(std::size_t row) const { return rows_[row].failure.text; }
  FailureCause cause(std::size_t row) const { return rows_[row].failure.cause; }

 private:
  struct RowState {
    Outcome outcome = Outcome::kUnconfirmed;
    Failure failure;
  };
  void settle(std::uint64_t tag, bool multiple, Outcome outcome, const Failure& failure,
              std::vector<std::size_t>* settled = nullptr);

  // Every erase from by_tag_ goes through here, to keep outstanding_bytes_ true.
  std::map<std::uint64_t, std::size_t>::iterator forget_tag(std::map<std::uint64_t, std::size_t>::iterator it);
  void forget_all_tags();

  std::vector<RowState> rows_;
  std::vector<std::size_t> row_bytes_;  // payload bytes, by row
  std::size_t outstanding_bytes_ = 0;
  std::map<std::uint64_t, std::size_t> by_tag_;              // outstanding tags only
  std::unordered_map<std::string, std::size_t> by_message_;  // for returns
};

}  // namespace relay
