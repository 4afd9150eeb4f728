#pragma once
// Fakes of the relay loop's links (pg/batch_store.h, broker/broker_link.h,
// pg/wake_listener.h, policy/loop_clock.h), for its collaborators' unit tests: no
// server, no socket, no sleep. Each records what the loop did and plays what a test
// scripts; time moves only when a test or a wait moves it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/broker_link.h"
#include "pg/batch_store.h"
#include "pg/pg_error.h"
#include "pg/wake_listener.h"
#include "policy/loop_clock.h"

namespace relaytest {

// A clock moved by hand; its waits move it by their whole timeout at once.
class ManualClock final : public relay::LoopClock {
 public:
  ManualClock() : now_(std::chrono::hours(1)) {}  // never the epoch (a "not yet" time)
  Clock::time_point now() const override { return now_; }
  void sleep_for(Clock::duration d) const override { now_ += d; }
  void wait_readable(pollfd*, std::size_t, std::chrono::milliseconds timeout) const override { now_ += timeout; }
  void advance(Clock::duration d) { now_ += d; }

 private:
  mutable Clock::time_point now_;
};

// ClaimedRow with id `id`, message id "m<id>", a small inline payload.
relay::ClaimedRow row(std::int64_t id, std::size_t payload_bytes = 10);
// rows first..first+n-1.
std::vector<relay::ClaimedRow> rows(std::int64_t first, std::size_t n);

// A broker that acks, nacks, returns and closes only when a test says so. Tags count
// from 1 and restart at a channel close, as the real channel's do. A wait with
// nothing scripted moves the clock by its timeout (the broker's silence).
class FakeBrokerLink final : public relay::BrokerLink {
 public:
  explicit FakeBrokerLink(ManualClock& clock) : clock_(clock) {}

  void connect() override;
  bool connected() const override { return connected_; }
  void disconnect() override { connected_ = false; }
  const std::string& endpoint() const override { return endpoint_; }
  std::uint64_t publish(const relay::OutboundMessage& message) override;
  std::optional<relay::BrokerEvent> next_event(std::chrono::milliseconds timeout) override;
  int socket() const override { return -1; }
  void set_corked(bool) override {}
  bool has_buffered_data() const override { return !events_.empty(); }
  bool readable_now() const override { return !events_.empty(); }
  bool blocked() const override { return blocked_; }

  // What the broker says next, in order.
  void ack(std::uint64_t tag, bool multiple = false);
  void nack(std::uint64_t tag, bool multiple = false);
  void returned(const std::string& message_id);
  void close_channel(int reply_code, const std::string& text);
  void close_connection(const std::string& text);
  // Acks every tag published so far and not yet settled by a scripted event.
  void ack_all() { ack(next_tag_ - 1, true); }

  // A scripted failure of the next publish (then it works again).
  void fail_next_publish(const std::string& why) { fail_publish_ = why; }
  void unpublishable_next(const std::string& why) { unpublishable_ = why; }
  void set_blocked(bool blocked) { blocked_ = blocked; }
  void refuse_connect(const std::string& why) { refuse_connect_ = why; }

  // Every publish, in order: the row id of each, and its tag.
  struct Published {
    std::int64_t outbox_id;
    std::string message_id;
    std::uint64_t tag;
  };
  const std::vector<Published>& published() const { return published_; }
  std::size_t connects() const { return connects_; }

 private:
  ManualClock& clock_;
  std::string endpoint_ = "fake-broker:5672/";
  bool connected_ = false, blocked_ = false;
  std::uint64_t next_tag_ = 1;
  std::deque<relay::BrokerEvent> events_;
  std::vector<Published> published_;
  std::optional<std::string> fail_publish_, unpublishable_, refuse_connect_;
  std::size_t connects_ = 0;
};

// An outbox of pending rows in memory. A claim takes rows in id order (skipping
// those other batches hold, as SKIP LOCKED does), commit_batch records the marks.
class FakeBatchStore final : public relay::BatchStore {
 public:
  explicit FakeBatchStore(std::vector<relay::ClaimedRow> pending = {}) : pending_(std::move(pending)) {}

  void connect() override;
  bool connected() const override { return connected_; }
  void disconnect() override;
  std::string endpoint() const override { return "fake-pg:5432/outbox"; }
  std::vector<relay::ClaimedRow> claim(int limit) override;
  std::vector<relay::ClaimedRow> claim_around(int limit, std::int64_t, std::int64_t) override { return claim(limit); }
  std::vector<relay::ClaimedRow> claim_above(int limit, std::int64_t) override { return claim(limit); }
  std::vector<relay::ClaimedRow> claim_key_heads(int limit, const std::vector<int>&, relay::KeyCursor&) override {
    return claim(limit);
  }
  bool in_batch() const override { return !held_.empty(); }
  std::size_t load_payloads(std::vector<relay::ClaimedRow>& rows, std::size_t first, std::size_t max_bytes) override;
  void commit_batch(const std::vector<const relay::ClaimedRow*>& acked, const std::vector<relay::FailedRow>& failed,
                    int max_attempts) override;
  void abort_batch() override;
  bool has_due_rows() override { return !pending_.empty(); }
  std::optional<double> next_scheduled_in() override { return std::nullopt; }
  relay::PendingStats stats() override;
  void join_lanes(relay::LaneManager&) override {}
  relay::LaneManager::Change rebalance_lanes(relay::LaneManager&) override { return {}; }

  void add(std::vector<relay::ClaimedRow> more);
  // The next commit_batch (or claim) throws this, as PostgreSQL would.
  void fail_next_commit(relay::PgError error) { commit_error_ = std::move(error); }
  void fail_next_claim(relay::PgError error) { claim_error_ = std::move(error); }

  const std::vector<std::int64_t>& marked_published() const { return marked_; }
  const std::vector<relay::FailedRow>& marked_failed() const { return failed_; }
  std::size_t pending() const { return pending_.size(); }
  std::size_t commits() const { return commits_; }
  std::size_t aborts() const { return aborts_; }
  std::size_t payload_fetches() const { return payload_fetches_; }

 private:
  bool connected_ = false;
  std::vector<relay::ClaimedRow> pending_;  // in id order
  std::vector<relay::ClaimedRow> held_;     // the open batch's rows
  std::vector<std::int64_t> marked_;
  std::vector<relay::FailedRow> failed_;
  std::optional<relay::PgError> commit_error_, claim_error_;
  std::size_t commits_ = 0, aborts_ = 0, payload_fetches_ = 0;
};

// The waiting lock and notifications, scripted.
class FakeWakeListener final : public relay::WakeListener {
 public:
  void connect() override;
  bool connected() const override { return connected_; }
  void disconnect() override;
  Arm arm() override;
  void disarm(Release) override;
  bool armed() const override { return armed_; }
  const std::string& lock_holder() const override { return holder_; }
  int socket() const override { return -1; }
  Wake take_notifications() override;

  void notify() { wake_.producer = true; }
  void hand_over() { wake_.handover = true; }
  // The session is lost: the next take_notifications() throws, as libpqxx does.
  void lose_session() { lost_ = true; }
  void refuse_connect(bool refuse) { refuse_connect_ = refuse; }
  void set_arm_result(Arm result) { arm_result_ = result; }
  std::size_t handovers() const { return handovers_; }
  std::size_t connects() const { return connects_; }

 private:
  bool connected_ = false, armed_ = false, lost_ = false, refuse_connect_ = false;
  Arm arm_result_ = Arm::kArmed;
  Wake wake_;
  std::string holder_;
  std::size_t handovers_ = 0, connects_ = 0;
};

}  // namespace relaytest
