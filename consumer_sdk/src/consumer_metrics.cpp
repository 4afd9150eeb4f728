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
      set_aside_(r.gauge("outbox_consumer_set_aside",
                         "Failed messages set aside, unacked, until their next try (RetryOrder::kSetAside).",
                         {{"consumer", consumer}})) {}

}  // namespace outbox::detail
