// ConsumerWorker's side of the sequence guard: events held in inbox_held are applied
// when their turn comes, and worker 0 reports the keys that wait for a missing one.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>

#include "consumer_worker.h"
#include "outbox/log_fields.h"
#include "outbox/one_line.h"

namespace outbox::detail {
namespace {

// One drain applies at most this many of a key's held events before the worker
// goes back to its queue (the sweep resumes it a second later).
constexpr int kDrainBatch = 500;
constexpr auto kSweepEvery = std::chrono::seconds(1);
constexpr auto kStatusEvery = std::chrono::seconds(5);
constexpr int kStatusKeys = 20;
// Keys logged per status refresh; the rest are counted in the gauges.
constexpr std::size_t kGapsLogged = 10;

}  // namespace

void ConsumerWorker::drain_held(const std::string& key) {
  const auto& o = shared_.options;
  for (int n = 0; n < kDrainBatch && !shared_.stop.is_set(); ++n) {
    std::optional<HeldMessage> taken;
    bool next_held = false;
    std::string error;
    Outcome outcome = classified(
        [&] {
          if (!pg_) pg_ = open_watched_connection(pg_dsn_);
          pqxx::work tx(*pg_, "outbox_consumer_held");
          taken = shared_.held->take_next(tx, key);
          if (!taken) return Outcome::kHeld;
          // Its turn (key_seq = last + 1 when taken); a duplicate if a redelivery of it
          // was applied since.
          auto c = shared_.guard->check(tx, taken->ks);
          next_held = c.next_held;
          bool apply = c.outcome == SequenceOutcome::kApply;
          if (apply && shared_.inbox)
            apply = shared_.inbox->record(tx, taken->delivery.message_id, taken->delivery.type) == InboxOutcome::kNew;
          if (apply) shared_.handler(tx, taken->delivery);
          shared_.held->remove(tx, taken->ks);
          tx.commit();
          return apply ? Outcome::kProcessed : Outcome::kDuplicate;
        },
        error);
    if (!taken) {
      if (outcome == Outcome::kEnvironment)
        spdlog::warn("consumer {}: held events of key '{}' not applied now: {}", name_, one_line(key, 200),
                     one_line(error));
      return;
    }
    const std::string id = taken->delivery.message_id.to_string();
    LogFields fields{{"message_id", id}, {"ordering_key", one_line(key, 200)}, {"key_seq", taken->ks.seq}};
    if (outcome == Outcome::kProcessed || outcome == Outcome::kDuplicate) {
      outcome == Outcome::kProcessed ? shared_.metrics->processed() : shared_.metrics->duplicate();
      if (!next_held) return;
      continue;
    }
    shared_.metrics->failed();
    if (outcome == Outcome::kEnvironment) {
      // Nobody's try: the sweep takes it up again.
      spdlog::warn("consumer {}: held message {} (key '{}', sequence {}) not applied now: {}", name_, id,
                   one_line(key, 200), taken->ks.seq, one_line(error));
      return;
    }
    const int attempts = taken->attempts + 1;
    const bool final = outcome == Outcome::kPermanent || attempts >= o.max_attempts;
    const auto delay = retry_backoff(o.retry_delay, o.retry_delay_max, attempts);
    std::string ignored;
    classified(
        [&] {
          if (!pg_) pg_ = open_watched_connection(pg_dsn_);
          pqxx::work tx(*pg_, "outbox_consumer_held");
          shared_.held->record_failure(tx, taken->ks, one_line(error), delay, final);
          tx.commit();
          return Outcome::kProcessed;
        },
        ignored);
    if (final)
      spdlog::error(
          "consumer {}: key '{}' is stuck: held message {} (sequence {}) failed {} {}: {}; the key's later events "
          "stay held until an operator retries or skips it (docs/CONSUMER.md, \"Sequence guard\")",
          name_, one_line(key, 200), id, taken->ks.seq, attempts, attempts == 1 ? "try" : "tries", one_line(error));
    else
      spdlog::warn("consumer {}: held message {} (key '{}', sequence {}) failed try {}/{}, next try in {} ms: {}",
                   name_, id, one_line(key, 200), taken->ks.seq, attempts, o.max_attempts, delay.count(),
                   one_line(error));
    return;
  }
}

void ConsumerWorker::sweep_held(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now < next_sweep_) return;
  // Workers sweep a tenth of a second apart, not all at once.
  next_sweep_ = now + kSweepEvery + std::chrono::milliseconds(100 * (index_ % 10));
  std::vector<std::string> keys;
  std::string error;
  Outcome outcome = classified(
      [&] {
        if (!pg_) pg_ = open_watched_connection(pg_dsn_);
        pqxx::work tx(*pg_, "outbox_consumer_held");
        keys = shared_.held->ready_keys(tx, 100);
        tx.commit();
        return Outcome::kProcessed;
      },
      error);
  if (outcome != Outcome::kProcessed) {
    next_sweep_ = now + 5 * kSweepEvery;  // the database is away: no log line every second
    spdlog::warn("consumer {}: could not look for held events due: {}", name_, one_line(error));
    return;
  }
  for (const auto& key : keys) {
    if (shared_.stop.is_set()) return;
    drain_held(key);
  }
  if (index_ == 0 && now >= next_status_) {
    // As often as the alert bound asks, at most every 5 s.
    next_status_ = now +
                   std::min<std::chrono::steady_clock::duration>(kStatusEvery, shared_.options.sequence_gap_alert);
    refresh_sequence_status();
  }
}

void ConsumerWorker::refresh_sequence_status() {
  SequenceStatus st;
  std::string error;
  Outcome outcome = classified(
      [&] {
        if (!pg_) pg_ = open_watched_connection(pg_dsn_);
        pqxx::work tx(*pg_, "outbox_consumer_held");
        st = shared_.held->status(tx, shared_.options.sequence_gap_alert, kStatusKeys);
        tx.commit();
        return Outcome::kProcessed;
      },
      error);
  if (outcome != Outcome::kProcessed) {
    spdlog::warn("consumer {}: could not read the sequence guard's status: {}", name_, one_line(error));
    return;
  }
  st.as_of = std::chrono::system_clock::now();
  shared_.metrics->sequence_status(st);
  // A key is logged once when it crosses the alert bound, and again only after its
  // gap closed and opened again.
  std::set<std::string> now_gapped;
  std::size_t logged = 0;
  for (const auto& g : st.oldest) {
    now_gapped.insert(g.key);
    if (reported_gaps_.count(g.key) || logged >= kGapsLogged) continue;
    ++logged;
    LogFields fields{{"ordering_key", one_line(g.key, 200)}};
    spdlog::error(
        "consumer {}: key '{}' has waited {:.0f} s for sequence {} (last applied {}, next held {}): its later events "
        "are held, not applied; audit it with outbox-relay sequence-audit",
        shared_.options.consumer.value(), one_line(g.key, 200), g.waiting_s, g.last_applied + 1, g.last_applied,
        g.next_held);
  }
  if (st.keys_gapped > static_cast<std::int64_t>(st.oldest.size()))
    spdlog::error("consumer {}: {} keys wait for a missing event longer than {} ms (outbox_consumer_sequence_gaps)",
                  shared_.options.consumer.value(), st.keys_gapped, shared_.options.sequence_gap_alert.count());
  reported_gaps_ = std::move(now_gapped);
  if (st.stuck > reported_stuck_)
    spdlog::error("consumer {}: {} held message(s) failed max_attempts tries and block their keys",
                  shared_.options.consumer.value(), st.stuck);
  reported_stuck_ = st.stuck;
  std::lock_guard lock(shared_.sequence_status_mutex);
  shared_.sequence_status = std::move(st);
}

}  // namespace outbox::detail
