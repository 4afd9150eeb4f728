#include "policy/confirm_tracker.h"

#include <algorithm>

namespace relay {

void ConfirmTracker::reset(std::size_t rows) {
  rows_.assign(rows, RowState{});
  row_bytes_.assign(rows, 0);
  forget_all_tags();
  by_message_.clear();
}

void ConfirmTracker::on_published(std::size_t row, std::uint64_t tag, const std::string& message_id,
                                  std::size_t bytes) {
  by_tag_[tag] = row;
  by_message_[message_id] = row;
  row_bytes_[row] = bytes;
  outstanding_bytes_ += bytes;
}

std::map<std::uint64_t, std::size_t>::iterator ConfirmTracker::forget_tag(
    std::map<std::uint64_t, std::size_t>::iterator it) {
  outstanding_bytes_ -= row_bytes_[it->second];
  return by_tag_.erase(it);
}

void ConfirmTracker::forget_all_tags() {
  by_tag_.clear();
  outstanding_bytes_ = 0;
}

void ConfirmTracker::settle(std::uint64_t tag, bool multiple, Outcome outcome, const Failure& failure,
                            std::vector<std::size_t>* settled) {
  auto apply = [&](std::size_t row) {
    if (settled) settled->push_back(row);
    auto& state = rows_[row];
    if (state.outcome == Outcome::kReturned) return;  // its ack does not make it routed
    state.outcome = outcome;
    state.failure = failure;
  };
  if (!multiple) {
    auto it = by_tag_.find(tag);
    if (it == by_tag_.end()) return;  // unknown or already settled: nothing to do
    apply(it->second);
    forget_tag(it);
    return;
  }
  auto end = by_tag_.upper_bound(tag);
  for (auto it = by_tag_.begin(); it != end;) {
    apply(it->second);
    it = forget_tag(it);
  }
}

void ConfirmTracker::on_ack(std::uint64_t tag, bool multiple, std::vector<std::size_t>* acked_rows) {
  settle(tag, multiple, Outcome::kAcked, Failure{}, acked_rows);
}

void ConfirmTracker::on_nack(std::uint64_t tag, bool multiple, const std::string& reason) {
  settle(tag, multiple, Outcome::kNacked, Failure{FailureCause::kNone, reason});
}

void ConfirmTracker::on_return(const std::string& message_id, const std::string& reason) {
  auto it = by_message_.find(message_id);
  if (it == by_message_.end()) return;
  rows_[it->second].outcome = Outcome::kReturned;
  rows_[it->second].failure = Failure{FailureCause::kNone, reason};
}

void ConfirmTracker::on_unpublishable(std::size_t row, const std::string& reason) {
  rows_[row].outcome = Outcome::kInvalid;
  rows_[row].failure = Failure{FailureCause::kNone, reason};
}

void ConfirmTracker::fail_outstanding(const Failure& failure, Outcome outcome) {
  for (const auto& [tag, row] : by_tag_) {
    auto& state = rows_[row];
    if (state.outcome == Outcome::kReturned) continue;
    state.outcome = outcome;
    state.failure = failure;
  }
  forget_all_tags();
}

std::vector<std::uint64_t> ConfirmTracker::fail_oldest_while(const std::function<bool(std::size_t row)>& overdue,
                                                             const Failure& failure) {
  std::vector<std::uint64_t> tags;
  for (auto it = by_tag_.begin(); it != by_tag_.end() && overdue(it->second); it = forget_tag(it)) {
    tags.push_back(it->first);
    auto& state = rows_[it->second];
    if (state.outcome == Outcome::kReturned) continue;
    state.outcome = Outcome::kFailed;
    state.failure = failure;
  }
  return tags;
}

std::size_t ConfirmTracker::oldest_outstanding() const {
  return by_tag_.empty() ? static_cast<std::size_t>(-1) : by_tag_.begin()->second;
}

std::vector<std::size_t> ConfirmTracker::take_outstanding() {
  std::vector<std::size_t> rows;
  for (const auto& [tag, row] : by_tag_) {
    auto& state = rows_[row];
    if (state.outcome == Outcome::kReturned) continue;
    state = RowState{};
    rows.push_back(row);
  }
  forget_all_tags();
  std::sort(rows.begin(), rows.end());
  return rows;
}

void ConfirmTracker::on_refused(std::size_t row, const std::string& reason) {
  for (auto it = by_tag_.begin(); it != by_tag_.end(); ++it) {
    if (it->second != row) continue;
    forget_tag(it);
    break;
  }
  rows_[row].outcome = Outcome::kRefused;
  rows_[row].failure = Failure{FailureCause::kNone, reason};
}

std::size_t ConfirmTracker::sole_outstanding() const {
  return by_tag_.size() == 1 ? by_tag_.begin()->second : static_cast<std::size_t>(-1);
}

}  // namespace relay
