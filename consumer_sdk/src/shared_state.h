#pragma once
// SharedState: what the workers of one ConsumerRunner share.

#include <memory>
#include <mutex>
#include <optional>

#include "consumer_metrics.h"
#include "held_messages.h"
#include "outbox/inbox.h"
#include "outbox/inbox_retention.h"
#include "outbox/metrics.h"
#include "outbox/runner_options.h"
#include "outbox/sequence_guard.h"
#include "outbox/sequence_status.h"
#include "retry_tracker.h"
#include "stop_signal.h"

namespace outbox::detail {

// Everything the workers of one runner share: its options and handler, the inbox,
// retention and sequence guard it set up, its metrics, the retry counts and the stop
// signal. A header of its own, so that the runner and its workers both read it and
// neither includes the other's header for it.
// Owned by the runner; outlives the workers. Thread safety: each member's own
// (sequence_status only under sequence_status_mutex).
struct SharedState {
  SharedState(const RunnerOptions& o, const Handler& h) : options(o), handler(h) {}
  const RunnerOptions& options;
  const Handler& handler;
  std::optional<Inbox> inbox;               // set with Deduplication::kInbox
  std::optional<InboxRetention> retention;  // set with options.retention
  std::optional<SequenceGuard> guard;       // set with options.sequence_guard
  std::optional<HeldMessages> held;         // set with options.sequence_guard
  std::mutex sequence_status_mutex;
  SequenceStatus sequence_status;               // guarded by sequence_status_mutex; refreshed by worker 0
  std::shared_ptr<metrics::Registry> registry;  // options.metrics, or the runner's own
  std::optional<ConsumerMetrics> metrics;       // set by the runner's constructor
  RetryTracker retries;
  StopSignal stop;
};

}  // namespace outbox::detail
