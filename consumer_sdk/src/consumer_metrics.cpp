#include "consumer_metrics.h"

namespace outbox::detail {

ConsumerMetrics::ConsumerMetrics(metrics::Registry& r, const std::string& consumer)
    : processed_(r.counter("outbox_consumer_processed_total",
                           "Messages whose handler transaction committed and that were acked.",
                           {{"consumer", consumer}})),
      duplicates_(r.counter("inbox_duplicates_total",
                            "Deliveries the inbox recognised as already processed, acked without an effect.",
                            {{"consumer", consumer}})),
      failed_(r.counter("outbox_consumer_failed_total", "Handler or commit failures, one per failed try.",
                        {{"consumer", consumer}})),
      retried_(r.counter("outbox_consumer_retried_total", "Failed tries handed back to the queue for another try.",
                         {{"consumer", consumer}})),
      dead_lettered_(r.counter("outbox_consumer_dead_lettered_total",
                               "Messages rejected to the dead-letter exchange (permanent error, no valid "
                               "message id, or max_attempts reached).",
                               {{"consumer", consumer}})),
      late_deliveries_(r.counter("inbox_late_deliveries_total",
                                 "Messages that arrived older than the inbox retention (a duplicate of them "
                                 "could go unnoticed).",
                                 {{"consumer", consumer}})),
      held_(r.counter("outbox_consumer_sequence_held_total",
                      "Events that arrived before their turn on their key and were held until the missing ones "
                      "were applied (sequence guard).",
                      {{"consumer", consumer}})),
      set_aside_(r.gauge("outbox_consumer_set_aside",
                         "Failed messages set aside, unacked, until their next try (RetryOrder::kSetAside).",
                         {{"consumer", consumer}})),
      held_now_(r.gauge("outbox_consumer_sequence_held", "Events held now in inbox_held (sequence guard).",
                        {{"consumer", consumer}})),
      gaps_(r.gauge("outbox_consumer_sequence_gaps",
                    "Keys whose later events have waited for a missing one longer than sequence_gap_alert.",
                    {{"consumer", consumer}})),
      stuck_(r.gauge("outbox_consumer_sequence_stuck",
                     "Held events whose handler failed max_attempts times: their keys wait for an operator.",
                     {{"consumer", consumer}})),
      oldest_gap_(r.gauge("outbox_consumer_sequence_oldest_gap_seconds",
                          "How long the longest-waiting key past sequence_gap_alert has waited; 0 when none.",
                          {{"consumer", consumer}})) {}

void ConsumerMetrics::sequence_status(const SequenceStatus& s) {
  held_now_.set(static_cast<double>(s.held));
  gaps_.set(static_cast<double>(s.keys_gapped));
  stuck_.set(static_cast<double>(s.stuck));
  oldest_gap_.set(s.oldest_gap_s);
}

}  // namespace outbox::detail
