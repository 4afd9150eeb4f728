#include "loop_fakes.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace relaytest {

using relay::BrokerEvent;
using relay::ClaimedRow;
using relay::PgError;

ClaimedRow row(std::int64_t id, std::size_t payload_bytes) {
  ClaimedRow r;
  r.id = id;
  r.ctid = "(0," + std::to_string(id) + ")";
  r.message_id = "m" + std::to_string(id);
  r.exchange = "x";
  r.routing_key = "k";
  r.type = "t";
  r.content_type = "application/json";
  r.payload = std::string(payload_bytes, 'p');
  r.payload_bytes = payload_bytes;
  return r;
}

std::vector<ClaimedRow> rows(std::int64_t first, std::size_t n) {
  std::vector<ClaimedRow> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(row(first + static_cast<std::int64_t>(i)));
  return out;
}

// FakeBrokerLink

void FakeBrokerLink::connect() {
  ++connects_;
  if (refuse_connect_) {
    const auto why = *std::exchange(refuse_connect_, std::nullopt);
    throw outbox::amqp::AmqpError(why);
  }
  connected_ = true;
  next_tag_ = 1;
  events_.clear();
}

std::uint64_t FakeBrokerLink::publish(const relay::OutboundMessage& message) {
  if (!connected_) throw outbox::amqp::AmqpError("not connected");
  if (unpublishable_) throw relay::UnpublishableMessage(*std::exchange(unpublishable_, std::nullopt));
  if (fail_publish_) {
    connected_ = false;
    throw outbox::amqp::AmqpError(*std::exchange(fail_publish_, std::nullopt));
  }
  published_.push_back({message.outbox_id, *message.message_id, next_tag_});
  return next_tag_++;
}

std::optional<BrokerEvent> FakeBrokerLink::next_event(std::chrono::milliseconds timeout) {
  if (events_.empty()) {
    clock_.advance(timeout);
    return std::nullopt;
  }
  auto ev = events_.front();
  events_.pop_front();
  // As AmqpPublisher: a closed channel is reopened (tags from 1); a closed
  // connection leaves the link disconnected.
  if (ev.kind == BrokerEvent::Kind::kChannelClosed) next_tag_ = 1;
  if (ev.kind == BrokerEvent::Kind::kConnectionClosed) connected_ = false;
  return ev;
}

void FakeBrokerLink::ack(std::uint64_t tag, bool multiple) {
  events_.push_back(BrokerEvent{BrokerEvent::Kind::kAck, tag, multiple});
}

void FakeBrokerLink::nack(std::uint64_t tag, bool multiple) {
  BrokerEvent ev{BrokerEvent::Kind::kNack, tag, multiple};
  ev.reason = "nacked by the broker";
  events_.push_back(ev);
}

void FakeBrokerLink::returned(const std::string& message_id) {
  BrokerEvent ev{BrokerEvent::Kind::kReturn};
  ev.message_id = message_id;
  ev.reason = "312 NO_ROUTE";
  events_.push_back(ev);
}

void FakeBrokerLink::close_channel(int reply_code, const std::string& text) {
  BrokerEvent ev{BrokerEvent::Kind::kChannelClosed};
  ev.reply_code = reply_code;
  ev.reason = "channel closed by broker: " + std::to_string(reply_code) + " " + text;
  events_.push_back(ev);
}

void FakeBrokerLink::close_connection(const std::string& text) {
  BrokerEvent ev{BrokerEvent::Kind::kConnectionClosed};
  ev.reason = text;
  events_.push_back(ev);
}

// FakeBatchStore

void FakeBatchStore::connect() {
  disconnect();
  connected_ = true;
}

void FakeBatchStore::disconnect() {
  abort_batch();
  connected_ = false;
}

std::vector<ClaimedRow> FakeBatchStore::claim(int limit) {
  if (!connected_) throw PgError(PgError::Kind::kSessionLost, "not connected");
  if (!held_.empty()) throw PgError(PgError::Kind::kUsage, "a batch is open on this store");
  if (claim_error_) {
    const auto e = *std::exchange(claim_error_, std::nullopt);
    if (e.kind() == PgError::Kind::kSessionLost) connected_ = false;
    throw e;
  }
  const auto n = std::min<std::size_t>(pending_.size(), static_cast<std::size_t>(std::max(limit, 0)));
  held_.assign(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  return held_;
}

std::size_t FakeBatchStore::load_payloads(std::vector<ClaimedRow>& rows, std::size_t first, std::size_t max_bytes) {
  if (held_.empty()) throw PgError(PgError::Kind::kUsage, "no batch open");
  ++payload_fetches_;
  std::size_t bytes = 0, i = first;
  for (; i < rows.size(); ++i) {
    if (rows[i].payload_loaded) continue;
    if (bytes > 0 && bytes + rows[i].payload_bytes > max_bytes) break;
    bytes += rows[i].payload_bytes;
    rows[i].payload.assign(rows[i].payload_bytes, 'p');
    rows[i].payload_loaded = true;
  }
  return i;
}

void FakeBatchStore::commit_batch(const std::vector<const ClaimedRow*>& acked,
                                  const std::vector<relay::FailedRow>& failed, int) {
  if (held_.empty()) throw PgError(PgError::Kind::kUsage, "no batch open");
  if (commit_error_) {
    const auto e = *std::exchange(commit_error_, std::nullopt);
    if (e.kind() != PgError::Kind::kInDoubt) abort_batch();  // rolled back: pending again
    if (e.kind() != PgError::Kind::kStatement) connected_ = false;
    held_.clear();
    throw e;
  }
  std::set<std::int64_t> done;
  for (const auto* r : acked) {
    marked_.push_back(r->id);
    done.insert(r->id);
  }
  for (const auto& f : failed) failed_.push_back(f);
  // Failed rows are pending again (their retry is the relay's backoff, not the fake's).
  for (const auto& r : held_)
    if (!done.count(r.id)) pending_.push_back(r);
  std::sort(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  held_.clear();
  ++commits_;
}

void FakeBatchStore::abort_batch() {
  if (held_.empty()) return;
  ++aborts_;
  pending_.insert(pending_.end(), held_.begin(), held_.end());
  std::sort(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  held_.clear();
}

relay::PendingStats FakeBatchStore::stats() {
  if (!connected_) throw PgError(PgError::Kind::kSessionLost, "not connected");
  relay::PendingStats s;
  s.pending = static_cast<std::int64_t>(pending_.size());
  return s;
}

void FakeBatchStore::add(std::vector<ClaimedRow> more) {
  pending_.insert(pending_.end(), more.begin(), more.end());
  std::sort(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
}

// FakeWakeListener

void FakeWakeListener::connect() {
  ++connects_;
  if (refuse_connect_) throw std::runtime_error("could not connect to server: Connection refused");
  connected_ = true;
  lost_ = false;
}

void FakeWakeListener::disconnect() {
  connected_ = false;
  armed_ = false;
}

FakeWakeListener::Arm FakeWakeListener::arm() {
  if (!connected_ || lost_) throw std::runtime_error("server closed the connection unexpectedly");
  armed_ = arm_result_ == Arm::kArmed;
  holder_ = arm_result_ == Arm::kOtherRelay ? "another relay (pid 4711, user 'relay', application 'outbox-relay')" : "";
  return arm_result_;
}

void FakeWakeListener::disarm(Release how) {
  if (!armed_) return;
  armed_ = false;
  if (how == Release::kHandOver) ++handovers_;
}

FakeWakeListener::Wake FakeWakeListener::take_notifications() {
  if (!connected_ || lost_) {
    connected_ = false;
    throw std::runtime_error("server closed the connection unexpectedly");
  }
  return std::exchange(wake_, {});
}

}  // namespace relaytest
