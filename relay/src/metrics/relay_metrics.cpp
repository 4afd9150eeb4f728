#include "metrics/relay_metrics.h"

#include <fmt/format.h>
#include <algorithm>

#include <type_traits>

namespace relay {
namespace {

using outbox::metrics::exponential_buckets;

// 1 ms .. ~65 s: confirm and end-to-end latencies.
const std::vector<double> kLatencyBuckets = exponential_buckets(0.001, 2, 17);
// 0.1 ms .. ~6.5 s: claim and mark statements.
const std::vector<double> kStatementBuckets = exponential_buckets(0.0001, 2, 17);
// 0.1 ms .. 10 s in steps of 1, 1.5, 2, 3, 5, 7 per decade: fine enough to read a
// p99 of a few ms off the buckets of the per-stage latencies. Literals, so the
// bounds render as written.
const std::vector<double> kStageBuckets = {
    0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03,
    0.05,   0.07,    0.1,    0.15,   0.2,    0.3,    0.5,   0.7,    1,     1.5,   2,     3,     5,    7,     10};
// 1 .. 65536 rows.
const std::vector<double> kBatchBuckets = exponential_buckets(1, 2, 17);

outbox::metrics::Counter& failure_counter(outbox::metrics::Registry& r, const char* reason) {
  return r.counter("outbox_relay_publish_failures_total",
                   "Claimed rows not published, by reason: nack (broker refused), returned "
                   "(unroutable), channel_closed (the broker closed the channel over it, e.g. its "
                   "exchange missing or its size over max_message_size; or, without an attempt, for "
                   "a server failure), connection_lost, confirm_timeout, blocked (broker resource "
                   "alarm), invalid (a row that cannot be decoded or breaks an AMQP limit), batch_time_limit "
                   "(its batch stopped publishing or waiting before the session's idle timeout).",
                   {{"reason", reason}});
}

outbox::metrics::Counter& reconnects(outbox::metrics::Registry& r, const char* peer) {
  return r.counter("outbox_relay_reconnects_total",
                   "Connections re-established after the first, by peer (postgres, amqp).", {{"peer", peer}});
}

outbox::metrics::Gauge& connected(outbox::metrics::Registry& r, const char* peer) {
  return r.gauge("outbox_relay_connected", "1 while the relay holds a connection to the peer.", {{"peer", peer}});
}

outbox::metrics::Gauge& listen_role(outbox::metrics::Registry& r, const char* role) {
  return r.gauge("outbox_relay_listen_role",
                 "1 on the role this idle relay waits in: holder (holds the waiting lock; inserts wake "
                 "it), bystander (waits for the holder's handover), answering (answers inserts for a "
                 "holder that does not), polling (busy a moment ago: claims again within a millisecond, leaving "
                 "the lock alone).",
                 {{"role", role}});
}

// One series per stage of `Stage` (label `stage`), made by `make(labels)`, in stage order.
template <class Stage, std::size_t N, class Name, class Make>
auto per_stage(Name name, Make make) {
  std::array<std::remove_reference_t<decltype(make(outbox::metrics::Labels{}))>*, N> series{};
  for (std::size_t i = 0; i < N; ++i)
    series[i] = &make(outbox::metrics::Labels{{"stage", name(static_cast<Stage>(i))}});
  return series;
}

std::array<outbox::metrics::Histogram*, kLatencyStages> stage_histograms(outbox::metrics::Registry& r) {
  return per_stage<LatencyStage, kLatencyStages>(
      latency_stage_name, [&r](const outbox::metrics::Labels& l) -> auto& {
        return r.histogram("outbox_relay_stage_seconds",
                           "Per row marked published, where its time from created_at to the relay's commit went: "
                           "queued (until the claim that took it started), claim (that claim), publish (until its "
                           "basic.publish was written), confirm (until the broker's ack), settle (until the batch "
                           "committed). The stages add up to created_at -> commit.",
                           kStageBuckets, l);
      });
}

std::array<outbox::metrics::Counter*, kCpuStages> stage_cpu_counters(outbox::metrics::Registry& r) {
  return per_stage<CpuStage, kCpuStages>(
      cpu_stage_name, [&r](const outbox::metrics::Labels& l) -> auto& {
        return r.counter("outbox_relay_stage_cpu_seconds_total",
                         "CPU time of the relay loop's thread by stage: claim (the claim's round trip and libpq "
                         "reading its result), decode (turning the result into rows), publish (payload fetches, "
                         "basic.publish), settle (reading broker acks and events, the failure policy), mark "
                         "(marking or deleting the batch's rows, and the commit).",
                         l);
      });
}

}  // namespace

RelayMetrics::RelayMetrics(outbox::metrics::Registry& r, const std::string& version)
    : registry_(r),
      published_(r.counter("outbox_relay_published_total",
                           "Rows acked by the broker and marked published in a committed batch.")),
      batches_(r.counter("outbox_relay_batches_total", "Batches committed.")),
      parked_(r.counter("outbox_relay_parked_total", "Rows parked after reaching relay.max_attempts.")),
      commit_unknown_(r.counter("outbox_relay_commit_unknown_total",
                                "Batches whose COMMIT outcome is unknown (their rows may be "
                                "published again).")),
      failures_{&failure_counter(r, "nack"),
                &failure_counter(r, "returned"),
                &failure_counter(r, "channel_closed"),
                &failure_counter(r, "connection_lost"),
                &failure_counter(r, "confirm_timeout"),
                &failure_counter(r, "blocked"),
                &failure_counter(r, "invalid"),
                &failure_counter(r, "batch_time_limit")},
      reconnects_pg_(reconnects(r, "postgres")),
      reconnects_amqp_(reconnects(r, "amqp")),
      connected_pg_(connected(r, "postgres")),
      connected_amqp_(connected(r, "amqp")),
      blocked_(r.gauge("outbox_relay_amqp_blocked",
                       "1 while the broker blocks publishing (connection.blocked: a resource alarm).")),
      last_claim_(r.gauge("outbox_relay_last_claim_timestamp_seconds",
                          "Unix time of the last completed claim (0: none yet).")),
      pending_(r.gauge("outbox_relay_pending_rows",
                       "Rows neither published nor parked (all relays; refreshed every "
                       "http.stats_interval_s).")),
      parked_rows_(r.gauge("outbox_relay_parked_rows", "Rows parked, waiting for an operator.")),
      oldest_age_(r.gauge("outbox_relay_oldest_pending_age_seconds",
                          "Age of the oldest pending row (0 when none): the relay's lag.")),
      backlog_age_(r.gauge("outbox_relay_backlog_age_seconds",
                           "Seconds since the backlog gauges (pending, parked, oldest age) were last "
                           "measured: they are as old as this; it grows while PostgreSQL cannot be reached "
                           "(-1: never measured).")),
      lanes_owned_(r.gauge("outbox_relay_lanes_owned",
                           "Ordering lanes this relay owns (ordering: per_key; 0 otherwise).")),
      scheduled_rows_(r.gauge("outbox_relay_scheduled_rows",
                              "Rows scheduled for later (deliver_at ahead), not yet due and not counted as "
                              "pending (all relays; refreshed every http.stats_interval_s).")),
      scheduled_next_due_(r.gauge("outbox_relay_scheduled_next_due_seconds",
                                  "Seconds until the earliest scheduled row is due (-1: none scheduled).")),
      batch_size_(r.histogram("outbox_relay_batch_size_rows", "Rows per claimed batch.", kBatchBuckets)),
      claim_seconds_(r.histogram("outbox_relay_claim_duration_seconds", "Duration of the claim statement.",
                                 kStatementBuckets)),
      mark_seconds_(r.histogram("outbox_relay_mark_duration_seconds", "Duration of marking a batch and committing it.",
                                kStatementBuckets)),
      enqueue_to_confirm_(r.histogram("outbox_relay_enqueue_to_confirm_seconds",
                                      "From the row's created_at (its producer transaction), or its later "
                                      "deliver_at, to the broker's ack; includes time waiting to be claimed.",
                                      kLatencyBuckets)),
      publish_to_confirm_(r.histogram("outbox_relay_publish_to_confirm_seconds",
                                      "From basic.publish to the broker's ack, per message.", kLatencyBuckets)),
      scheduled_lateness_(r.histogram("outbox_relay_scheduled_lateness_seconds",
                                      "Scheduled rows: from deliver_at to the broker's ack (how late the relay "
                                      "published them).",
                                      kLatencyBuckets)),
      stage_seconds_(stage_histograms(r)),
      stage_cpu_(stage_cpu_counters(r)),
      stalled_(r.gauge("outbox_relay_publish_stalled",
                       "1 while rows are due but none was published for relay.stall_after_s.")),
      nacking_(r.gauge("outbox_relay_broker_nacking",
                       "1 while the broker nacks every publish (a run of nacks with no ack): a quorum queue "
                       "without a leader, or a full queue with overflow reject-publish.")),
      listen_role_{&listen_role(r, "holder"), &listen_role(r, "bystander"), &listen_role(r, "answering"),
                   &listen_role(r, "polling")},
      isolations_(r.counter("outbox_relay_isolations_total",
                            "Channel closes over one of several outstanding rows, after which the relay "
                            "published those rows one at a time to find the one at fault.")),
      isolated_rows_(r.counter("outbox_relay_isolated_rows_total",
                               "Rows published again, one at a time, by isolations.")),
      retention_deleted_(r.counter("outbox_relay_retention_deleted_total",
                                   "Published rows deleted by retention (this relay).")),
      retention_batch_seconds_(r.histogram("outbox_relay_retention_batch_duration_seconds",
                                           "Duration of one retention DELETE batch.", kStatementBuckets)),
      heartbeat_ns_(now_ns()),
      disconnected_ns_(now_ns()) {
  r.gauge("outbox_relay_build_info", "Always 1; the labels name the build.", {{"version", version}}).set(1);
}

std::int64_t RelayMetrics::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

void RelayMetrics::heartbeat() { heartbeat_ns_ = now_ns(); }

void RelayMetrics::set_connected(bool postgres, bool amqp, bool amqp_blocked) {
  if (postgres && amqp) disconnected_ns_ = 0;
  else if (disconnected_ns_.load() == 0) disconnected_ns_ = now_ns();
  connected_pg_.set(postgres ? 1 : 0);
  connected_amqp_.set(amqp ? 1 : 0);
  blocked_.set(amqp_blocked ? 1 : 0);
}

void RelayMetrics::connect_failed(const char* target, const char* cause, const std::string& text) {
  registry_
      .counter("outbox_relay_connect_failures_total",
               "Failed connection attempts, by target (postgres, amqp) and cause (refused, timeout, dns, tls, "
               "authentication, unknown_database, vhost, server_unavailable, other).",
               {{"target", target}, {"cause", cause}})
      .inc();
  std::lock_guard<std::mutex> lock(stall_mutex_);
  (std::string_view(target) == "postgres" ? connect_error_pg_ : connect_error_amqp_) = text;
}

void RelayMetrics::connected_to(const char* peer) {
  bool pg = std::string_view(peer) == "postgres";
  {
    std::lock_guard<std::mutex> lock(stall_mutex_);
    (pg ? connect_error_pg_ : connect_error_amqp_).clear();
  }
  auto& seen = pg ? seen_pg_ : seen_amqp_;
  if (seen.exchange(true)) (pg ? reconnects_pg_ : reconnects_amqp_).inc();
}

void RelayMetrics::probed() {
  last_claim_ns_ = now_ns();
  last_claim_.set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

void RelayMetrics::claimed(std::size_t rows, double claim_seconds) {
  probed();
  claim_seconds_.observe(claim_seconds);
  if (rows > 0) batch_size_.observe(static_cast<double>(rows));
}

void RelayMetrics::marked(double seconds) { mark_seconds_.observe(seconds); }

void RelayMetrics::committed(std::size_t published, std::size_t) {
  batches_.inc();
  published_.inc(static_cast<double>(published));
}

void RelayMetrics::failure(FailureReason reason, std::size_t rows) {
  failures_[static_cast<std::size_t>(reason)]->inc(static_cast<double>(rows));
}

void RelayMetrics::parked(std::size_t rows) { parked_.inc(static_cast<double>(rows)); }

void RelayMetrics::commit_unknown() { commit_unknown_.inc(); }

void RelayMetrics::enqueue_to_confirm(double seconds) {
  enqueue_to_confirm_.observe(seconds < 0 ? 0 : seconds);  // clock skew between hosts
}

void RelayMetrics::scheduled_lateness(double seconds) { scheduled_lateness_.observe(seconds < 0 ? 0 : seconds); }

void RelayMetrics::row_stages(const RowStages& stages) {
  for (std::size_t i = 0; i < kLatencyStages; ++i) stage_seconds_[i]->observe(stages[i]);
}

void RelayMetrics::set_lanes_owned(std::size_t lanes) { lanes_owned_.set(static_cast<double>(lanes)); }

void RelayMetrics::set_listen_role(ListenRole role) {
  const ListenRole roles[] = {ListenRole::kHolder, ListenRole::kBystander, ListenRole::kAnswering,
                              ListenRole::kPolling};
  for (std::size_t i = 0; i < listen_role_.size(); ++i) listen_role_[i]->set(roles[i] == role ? 1 : 0);
}

void RelayMetrics::set_stalled(bool stalled, const std::string& why) {
  std::lock_guard<std::mutex> lock(stall_mutex_);
  stalled_.set(stalled ? 1 : 0);
  stall_reason_ = stalled ? why : "";
}

void RelayMetrics::set_nacking(bool nacking, const std::string& why) {
  std::lock_guard<std::mutex> lock(stall_mutex_);
  nacking_reason_ = why;
  nacking_.set(nacking ? 1 : 0);
}

void RelayMetrics::isolation_started(std::size_t suspects) {
  isolations_.inc();
  isolated_rows_.inc(static_cast<double>(suspects));
}

void RelayMetrics::on_published(std::uint64_t tag) { unconfirmed_.emplace_hint(unconfirmed_.end(), tag, Clock::now()); }

void RelayMetrics::on_acked(std::uint64_t tag, bool multiple) {
  last_ack_ns_ = now_ns();
  const auto now = Clock::now();
  auto end = multiple ? unconfirmed_.upper_bound(tag) : unconfirmed_.find(tag);
  auto begin = multiple ? unconfirmed_.begin() : end;
  if (!multiple) {
    if (end == unconfirmed_.end()) return;
    ++end;
  }
  for (auto it = begin; it != end; ++it)
    publish_to_confirm_.observe(std::chrono::duration<double>(now - it->second).count());
  unconfirmed_.erase(begin, end);
}

void RelayMetrics::on_unconfirmed(std::uint64_t tag, bool multiple) {
  if (multiple) unconfirmed_.erase(unconfirmed_.begin(), unconfirmed_.upper_bound(tag));
  else unconfirmed_.erase(tag);
}

void RelayMetrics::on_channel_reset() { unconfirmed_.clear(); }

void RelayMetrics::set_scheduled(std::int64_t rows, std::optional<double> next_due_in_s) {
  scheduled_rows_.set(static_cast<double>(rows));
  scheduled_next_due_.set(next_due_in_s ? std::max(0.0, *next_due_in_s) : -1.0);
}

void RelayMetrics::set_backlog(std::int64_t pending, std::int64_t parked, double oldest_pending_age_s) {
  pending_.set(static_cast<double>(pending));
  parked_rows_.set(static_cast<double>(parked));
  oldest_age_.set(oldest_pending_age_s);
  backlog_ns_ = now_ns();
}

std::string RelayMetrics::render() {
  const auto measured = backlog_ns_.load();
  backlog_age_.set(measured == 0 ? -1.0 : static_cast<double>(now_ns() - measured) / 1e9);
  return registry_.render();
}

void RelayMetrics::retention_deleted(std::size_t rows, double seconds) {
  retention_deleted_.inc(static_cast<double>(rows));
  retention_batch_seconds_.observe(seconds);
}

std::optional<std::string> RelayMetrics::not_alive(std::chrono::seconds stall,
                                                   std::chrono::seconds max_disconnected) const {
  const auto seconds = [](std::int64_t ns) { return ns / 1000000000; };
  const auto now = now_ns();
  const auto idle = now - heartbeat_ns_.load();
  if (idle > std::chrono::nanoseconds(stall).count())
    return fmt::format("the relay loop made no progress for {} s (limit {} s)", seconds(idle), stall.count());
  const auto since = disconnected_ns_.load();
  if (max_disconnected.count() > 0 && since != 0 && now - since > std::chrono::nanoseconds(max_disconnected).count())
    return fmt::format("{} not connected for {} s (http.live_max_disconnected_s: {})",
                       connected_pg_.value() == 0 ? "PostgreSQL" : "RabbitMQ", seconds(now - since),
                       max_disconnected.count());
  return std::nullopt;
}

std::optional<std::string> RelayMetrics::not_ready(std::chrono::seconds max_claim_age) const {
  {
    // With the last attempt's error: a wrong password shows here, not only in the log.
    std::lock_guard<std::mutex> lock(stall_mutex_);
    // First: a broker that nacks everything makes the relay reconnect, and "not
    // connected" between two attempts would hide why.
    if (nacking_.value() != 0) return nacking_reason_;
    if (connected_pg_.value() == 0)
      return "not connected to PostgreSQL" + (connect_error_pg_.empty() ? "" : ": " + connect_error_pg_);
    if (connected_amqp_.value() == 0)
      return "not connected to RabbitMQ" + (connect_error_amqp_.empty() ? "" : ": " + connect_error_amqp_);
  }
  if (blocked_.value() != 0) return "RabbitMQ blocks publishing (resource alarm)";
  {
    std::lock_guard<std::mutex> lock(stall_mutex_);
    if (stalled_.value() != 0) return stall_reason_;
  }
  if (last_claim_ns_.load() == 0) return "no claim completed yet";
  // A broker ack is as good as a claim: a batch of big rows can take longer than the
  // limit to publish, and a relay whose rows the broker keeps taking is working.
  auto last = std::max(last_claim_ns_.load(), last_ack_ns_.load());
  auto age = std::chrono::nanoseconds(now_ns() - last);
  if (age > max_claim_age)
    return fmt::format("no claim completed and no broker ack for {} s (limit {} s)",
                       std::chrono::duration_cast<std::chrono::seconds>(age).count(), max_claim_age.count());
  return std::nullopt;
}

}  // namespace relay
