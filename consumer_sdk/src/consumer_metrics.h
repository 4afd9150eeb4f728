#pragma once
// ConsumerMetrics: a runner's counters, kept in process (ConsumerCounters) and
// exported to a metrics registry in Prometheus format, bumped together.

#include <string>

#include "outbox/consumer_counters.h"
#include "outbox/metrics.h"
#include "outbox/sequence_status.h"

namespace outbox::detail {

// Each event bumps the in-process counter and its exported series, labelled
// {consumer="<name>"}, with the names docs/CONSUMER.md promises
// (outbox_consumer_processed_total, inbox_duplicates_total, ...).
//
// Thread safety: every method may be called from any thread (atomics and
// lock-free registry counters). REQUIRES: `registry` outlives this object. Holds
// references into the registry: not copyable.
class ConsumerMetrics {
 public:
  ConsumerMetrics(metrics::Registry& registry, const std::string& consumer);
  ConsumerMetrics(const ConsumerMetrics&) = delete;
  ConsumerMetrics& operator=(const ConsumerMetrics&) = delete;

  void processed() { bump(counters_.processed, processed_); }
  void duplicate() { bump(counters_.duplicates, duplicates_); }
  void failed() { bump(counters_.failed, failed_); }
  void retried() { bump(counters_.retried, retried_); }
  void dead_lettered() { bump(counters_.dead_lettered, dead_lettered_); }
  void late_delivery() { bump(counters_.late_deliveries, late_deliveries_); }
  void held() { bump(counters_.held, held_); }
  // The sequence guard's state as last read from the database.
  void sequence_status(const SequenceStatus& s);
  // Messages set aside now (RetryOrder::kSetAside), across the runner's workers.
  void set_aside_changed(int delta) { set_aside_.add(delta); }

  const ConsumerCounters& counters() const { return counters_; }

 private:
  static void bump(std::atomic<std::uint64_t>& local, metrics::Counter& exported) {
    ++local;
    exported.inc();
  }

  ConsumerCounters counters_;
  metrics::Counter &processed_, &duplicates_, &failed_, &retried_, &dead_lettered_, &late_deliveries_, &held_;
  metrics::Gauge& set_aside_;
  metrics::Gauge &held_now_, &gaps_, &stuck_, &oldest_gap_;
};

}  // namespace outbox::detail
