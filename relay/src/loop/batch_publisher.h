#pragma once
// BatchPublisher: the rows of the batches in flight onto the confirm channel.

#include <cstddef>

#include "broker/broker_link.h"
#include "config/config.h"
#include "loop/batch_pipeline.h"
#include "loop/confirm_reader.h"
#include "loop/isolator.h"
#include "loop/publish_hold.h"
#include "metrics/relay_metrics.h"
#include "policy/loop_clock.h"

namespace relay {

// Publishes without waiting message by message, within amqp.publish_window
// messages and amqp.publish_window_bytes unconfirmed: suspects of an isolation
// first, a probe group at a time (Isolator), then each batch's rows in claim order.
// A row that cannot be decoded or encoded fails alone (an attempt) and the rows
// behind it go on; a row that goes alone waits until nothing else is outstanding.
// Large payloads are fetched in chunks just before they go, and each is dropped
// once sent, so a batch's memory is bounded whatever its payloads.
//
// Thread safety: none; the loop's thread owns it. REQUIRES: every reference
// outlives it.
class BatchPublisher {
 public:
  BatchPublisher(const AmqpConfig& config, BrokerLink& amqp, BatchPipeline& batches, Isolator& isolator,
                 PublishHold& hold, ConfirmReader& reader, RelayMetrics& metrics, const LoopClock& clock);

  // Publishes what may go now; whether anything went out (or a probe is out).
  bool publish_pending();
  // Publishes the batch's next rows while the window has room (after its claim).
  bool publish_some(InflightBatch& batch);
  // amqp.publish_window_bytes: room for `bytes` more beside what is unconfirmed; a
  // message larger than the whole window goes once nothing else is outstanding.
  bool window_has_room_for(std::size_t bytes) const;

 private:
  bool publish_probe();
  bool publish_suspect(InflightBatch& batch);
  bool publish_row(InflightBatch& batch, std::size_t row);
  bool load_payloads(InflightBatch& batch);

  const AmqpConfig& config_;
  const LoopClock& clock_;
  BrokerLink& amqp_;
  BatchPipeline& batches_;
  Isolator& isolator_;
  PublishHold& hold_;
  ConfirmReader& reader_;
  RelayMetrics& metrics_;
};

}  // namespace relay
