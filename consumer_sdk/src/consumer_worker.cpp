#include "consumer_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>

#include "outbox/environment_error.h"
#include "outbox/errors.h"
#include "outbox/log_fields.h"
#include "outbox/one_line.h"
#include "outbox/pg_conninfo.h"
#include "outbox/sequence_guard.h"
#include "session_limits.h"

namespace outbox::detail {
namespace {

// How often the broker says the message was returned before (x-delivery-count, set
// by quorum queues on a redelivery: by any consumer, also one that crashed); 0 when
// absent or not a count.
int broker_returns(const Delivery& d) {
  auto it = d.headers.find("x-delivery-count");
  if (it == d.headers.end()) return 0;
  try {
    long long n = std::stoll(it->second);
    return n > 0 && n < 1000000 ? static_cast<int>(n) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The pause after the `n`th environment failure in a row: 500 ms, doubling to 10 s
// (before the next message, and before a reconnect).
std::chrono::milliseconds environment_backoff(int n) {
  return std::min(std::chrono::milliseconds(500) * (1 << std::min(n - 1, 5)), std::chrono::milliseconds(10000));
}

// The worker's PostgreSQL connection string: pg_dsn with the session limits where
// the user set none (a hung server must not hold the worker, or stop(), for good).
std::string session_dsn(const RunnerOptions& o) {
  auto info = PgConnInfo::parse(o.pg_dsn);
  set_session_limits(info, "outbox-consumer " + o.consumer.value(), o.connect_timeout);
  return info.to_string();
}

}  // namespace

ConsumerWorker::ConsumerWorker(SharedState& shared, int index)
    : shared_(shared),
      index_(index),
      name_(shared.options.consumer.value() + "#" + std::to_string(index)),
      amqp_(amqp_settings(shared.options, "outbox-consumer " + name_)),
      pg_dsn_(session_dsn(shared.options)),
      set_aside_(shared.options.retry_order == RetryOrder::kSetAside
                     ? static_cast<std::size_t>(shared.options.prefetch - 1)
                     : 0) {}

ConsumerWorker::~ConsumerWorker() = default;

void ConsumerWorker::connect() {
  if (!pg_) pg_ = open_watched_connection(pg_dsn_);
  if (!amqp_.connected()) {
    amqp_.connect();
    amqp_.consume(shared_.options.queue, shared_.options.prefetch);
  }
}

void ConsumerWorker::run() {
  // Every line this worker thread logs names its consumer (JSON logs: a field).
  LogFields fields{{"consumer", shared_.options.consumer.value()}, {"worker", index_}};
  int losses = 0;  // connection failures in a row
  while (!shared_.stop.is_set()) {
    try {
      connect();
      losses = 0;
      consume_until_stopped();
    } catch (const std::exception& e) {
      // Unacked messages return to the queue with the connection; the inbox turns
      // any that did commit into duplicates.
      const auto backoff = environment_backoff(++losses);
      spdlog::warn("consumer {}: {}; reconnecting in {} ms", name_, one_line(e.what()), backoff.count());
      // Their delivery tags died with the channel; the broker requeued them.
      shared_.metrics->set_aside_changed(-static_cast<int>(set_aside_.take_all().size()));
      amqp_.close();
      if (pg_ && !pg_->is_open()) pg_.reset();
      if (shared_.stop.wait_for(backoff)) break;
    }
  }
  amqp_.close();
}

void ConsumerWorker::consume_until_stopped() {
  while (!shared_.stop.is_set()) {
    if (shared_.guard) sweep_held(false);
    const auto now = SetAsideQueue::Clock::now();
    if (auto due = set_aside_.take_due(now)) {
      shared_.metrics->set_aside_changed(-1);
      handle(*due);
      continue;
    }
    auto message = amqp_.next(set_aside_.wait_before_next(now, shared_.options.poll_interval));
    if (message) handle(*message);
  }
  requeue_set_aside();
}

void ConsumerWorker::requeue_set_aside() {
  for (const auto& m : set_aside_.take_all()) {
    shared_.metrics->set_aside_changed(-1);
    amqp_.requeue(m.delivery_tag);  // counted as retried when set aside
  }
}

void ConsumerWorker::handle(InboundMessage& m) {
  Delivery& d = m.delivery;
  try {
    d.message_id = MessageId::parse_distinct(m.message_id, "message_id");
  } catch (const ValidationError& e) {
    // Without an id the inbox cannot deduplicate it: never process it blindly.
    LogFields fields{{"type", one_line(d.type, 100)},
                     {"routing_key", one_line(d.routing_key, 255)},
                     {"reason", one_line(e.what(), 200)}};
    spdlog::error("consumer {}: dead-lettering a message without a valid message id (type '{}', routing key '{}'): {}",
                  name_, one_line(d.type, 100), one_line(d.routing_key, 255), one_line(e.what(), 200));
    amqp_.dead_letter(m.delivery_tag);
    shared_.metrics->dead_lettered();
    return;
  }
  d.attempt = std::max(shared_.retries.failures(d.message_id), broker_returns(d)) + 1;
  LogFields fields{{"message_id", d.message_id.to_string()}, {"type", one_line(d.type, 100)}, {"attempt", d.attempt}};
  note_late_delivery(d);

  std::string error;
  std::optional<KeySequence> ks;
  if (shared_.guard) {
    try {
      ks = key_sequence_of(d);
    } catch (const ValidationError& e) {
      // A half or malformed sequence cannot be put in order: never apply it blindly.
      settle_failure(m, Outcome::kPermanent, e.what());
      return;
    }
  }
  bool next_held = false;
  Outcome outcome = run_transaction(d, ks, next_held, error);
  if (outcome != Outcome::kEnvironment) environment_failures_ = 0;  // everything answered
  if (outcome == Outcome::kProcessed || outcome == Outcome::kDuplicate || outcome == Outcome::kHeld) {
    // Acked only after the commit: a crash before this line redelivers the message,
    // and the committed inbox row (or held row) makes that redelivery a duplicate.
    amqp_.ack(m.delivery_tag);
    shared_.retries.forget(d.message_id);
    if (outcome == Outcome::kProcessed) shared_.metrics->processed();
    if (outcome == Outcome::kDuplicate) shared_.metrics->duplicate();
    if (outcome == Outcome::kHeld) shared_.metrics->held();
    if (next_held) drain_held(ks->key);
    return;
  }
  settle_failure(m, outcome, error);
}

ConsumerWorker::Outcome ConsumerWorker::run_transaction(const Delivery& d, const std::optional<KeySequence>& ks,
                                                        bool& next_held, std::string& error) {
  return classified(
      [&] {
        if (!pg_) pg_ = open_watched_connection(pg_dsn_);
        pqxx::work tx(*pg_, "outbox_consumer");
        if (ks) {
          // First: it locks the key's row, so this key's events are applied one at a time.
          auto c = shared_.guard->check(tx, *ks);
          if (c.outcome == SequenceOutcome::kGap) {
            shared_.held->hold(tx, *ks, d);  // a redelivery of a held event is held once
            tx.commit();
            return Outcome::kHeld;
          }
          if (c.outcome == SequenceOutcome::kDuplicate) {
            // A redelivery, unless the inbox never saw this id: then the key's
            // sequence went back (its outbox counter was reset), and skipping would
            // lose an event. It goes to the dead-letter queue for an operator.
            if (shared_.inbox && !shared_.inbox->contains(tx, d.message_id))
              throw PermanentError("sequence " + std::to_string(ks->seq) + " of key '" + one_line(ks->key, 200) +
                                   "' is at or below the last applied (" + std::to_string(c.last_applied) +
                                   ") but this message was never applied: the key's sequence went back");
            tx.abort();
            return Outcome::kDuplicate;
          }
          next_held = c.next_held;
        }
        if (shared_.inbox && shared_.inbox->record(tx, d.message_id, d.type) == InboxOutcome::kDuplicate) {
          // Applied before the guard knew it: keep the sequence's advance.
          if (ks) tx.commit();
          else tx.abort();
          return Outcome::kDuplicate;
        }
        shared_.handler(tx, d);
        tx.commit();
        return Outcome::kProcessed;
      },
      error);
}

ConsumerWorker::Outcome ConsumerWorker::classified(const std::function<Outcome()>& body, std::string& error) {
  try {
    return body();
  } catch (const PermanentError& e) {
    error = e.what();
    return Outcome::kPermanent;
  } catch (const EnvironmentError& e) {
    error = e.what();
    return Outcome::kEnvironment;
  } catch (const pqxx::in_doubt_error& e) {
    return session_lost(std::string("commit outcome unknown: ") + e.what(), error);
  } catch (const pqxx::broken_connection& e) {
    return session_lost(std::string("PostgreSQL connection lost: ") + e.what(), error);
  } catch (const std::exception& e) {
    error = e.what();
    return Outcome::kFailed;
  } catch (...) {
    error = "handler threw a non-standard exception";
    return Outcome::kFailed;
  }
}

// A lost session is the environment's fault (an outage, a restart, a terminated
// backend): the message is requeued without counting a try. Except when the server
// said it closed the session because the handler held the transaction too long: that
// is the message's try (the transaction was rolled back, never committed), or a slow
// handler would be retried forever, repeating any outside effect without limit.
ConsumerWorker::Outcome ConsumerWorker::session_lost(std::string what, std::string& error) {
  std::string slow = pg_ ? slow_transaction_reason(pg_->server_fatal_sqlstate()) : std::string();
  pg_.reset();
  if (!slow.empty()) {
    error = std::move(slow);
    return Outcome::kFailed;
  }
  error = std::move(what);
  return Outcome::kEnvironment;
}

void ConsumerWorker::settle_failure(InboundMessage& m, Outcome outcome, const std::string& error) {
  const Delivery& d = m.delivery;
  const std::uint64_t tag = m.delivery_tag;
  const auto& o = shared_.options;
  const std::string id = d.message_id.to_string();
  LogFields reason{{"reason", one_line(error)}};
  shared_.metrics->failed();
  if (outcome == Outcome::kEnvironment) {
    // Not the message's fault: requeue without counting a try. Then pause before the
    // next message, longer at each failure in a row: during an outage every delivery
    // fails at once (connection refused), and a fixed retry_delay (which may be 0)
    // would cycle the messages through the queue, and the log, as fast as that.
    const auto pause = std::max(o.retry_delay, environment_backoff(++environment_failures_));
    spdlog::warn("consumer {}: message {} requeued, next message in {} ms: {}", name_, id, pause.count(),
                 one_line(error));
    amqp_.requeue(tag);
    shared_.metrics->retried();
    shared_.stop.wait_for(pause);
    return;
  }
  int failures = outcome == Outcome::kPermanent ? o.max_attempts : shared_.retries.record_failure(d.message_id);
  LogFields attempt{{"attempt", outcome == Outcome::kPermanent ? d.attempt : failures}};
  if (failures >= o.max_attempts) {
    spdlog::error("consumer {}: message {} ({}) dead-lettered to '{}' after {} {}: {}", name_, id,
                  one_line(d.type, 100), one_line(o.dead_letter_exchange, 255),
                  outcome == Outcome::kPermanent ? 1 : failures,
                  outcome == Outcome::kPermanent ? "try (permanent error)" : "tries", one_line(error));
    amqp_.dead_letter(tag);
    shared_.retries.forget(d.message_id);
    shared_.metrics->dead_lettered();
    return;
  }
  const auto delay = retry_backoff(o.retry_delay, o.retry_delay_max, failures);
  // Set aside (kSetAside, room left): the worker handles the next deliveries meanwhile.
  const std::string type = one_line(d.type, 100);
  if (set_aside_.add(m, SetAsideQueue::Clock::now() + delay)) {
    shared_.metrics->set_aside_changed(1);
    spdlog::warn("consumer {}: message {} ({}) failed try {}/{}, set aside for {} ms: {}", name_, id, type, failures,
                 o.max_attempts, delay.count(), one_line(error));
    shared_.metrics->retried();
    return;
  }
  spdlog::warn("consumer {}: message {} ({}) failed try {}/{}, requeued in {} ms: {}", name_, id, type, failures,
               o.max_attempts, delay.count(), one_line(error));
  shared_.stop.wait_for(delay);  // a stop cuts the wait short; the message is requeued at once
  amqp_.requeue(tag);
  shared_.metrics->retried();
}

void ConsumerWorker::note_late_delivery(const Delivery& d) {
  if (!shared_.retention) return;
  std::optional<std::chrono::system_clock::time_point> sent = d.timestamp;
  if (!sent && d.message_id.version() == 7)
    sent = std::chrono::system_clock::time_point(std::chrono::milliseconds(d.message_id.unix_ms()));
  if (!sent) return;
  auto now = std::chrono::system_clock::now();
  if (!shared_.retention->is_late(*sent, now)) return;
  shared_.metrics->late_delivery();
  auto age_s = std::chrono::duration_cast<std::chrono::seconds>(now - *sent);
  spdlog::warn(
      "consumer {}: late delivery of message {} ({}): sent {} ago, longer than the inbox retention {}; "
      "a duplicate of it may go unnoticed",
      name_, d.message_id.to_string(), one_line(d.type, 100), format_duration(age_s),
      format_duration(shared_.retention->policy().retention));
}

}  // namespace outbox::detail
