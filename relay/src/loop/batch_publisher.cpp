#include "loop/batch_publisher.h"

#include <spdlog/spdlog.h>

#include <string>

#include "metrics/stage_cpu.h"
#include "outbox/one_line.h"

namespace relay {
namespace {

// Large payloads are fetched in chunks of at most this many bytes, and each is
// dropped once published: with the claim's inline limit this bounds the memory a
// batch holds, whatever its payload sizes.
constexpr std::size_t kPayloadChunkBytes = 8 * 1024 * 1024;

}  // namespace

BatchPublisher::BatchPublisher(const AmqpConfig& config, BrokerLink& amqp, BatchPipeline& batches, Isolator& isolator,
                               PublishHold& hold, ConfirmReader& reader, RelayMetrics& metrics, const LoopClock& clock)
    : config_(config),
      clock_(clock),
      amqp_(amqp),
      batches_(batches),
      isolator_(isolator),
      hold_(hold),
      reader_(reader),
      metrics_(metrics) {}

bool BatchPublisher::publish_pending() {
  if (hold_.held(clock_.now())) return false;
  if (isolator_.solo()) {
    if (batches_.outstanding() > 0) return false;  // wait for the verdict on the probe in flight
    isolator_.set_solo(false);
  }
  if (batches_.isolating()) return publish_probe();
  for (auto& b : batches_)
    if (!b->publishing_done()) return publish_some(*b);
  return false;
}

// The next probe_size suspects (in claim order, across batches), and nothing else
// until the broker settled them. A row that goes alone goes in a group of its own.
bool BatchPublisher::publish_probe() {
  if (batches_.outstanding() > 0) return false;
  const StageCpu::Scope cpu(CpuStage::kPublish);
  std::size_t sent = 0;
  amqp_.set_corked(true);
  for (auto& b : batches_) {
    while (b->has_suspects() && sent < isolator_.probe_size()) {
      const bool alone = isolator_.must_go_alone(b->rows()[b->next_suspect()], clock_.now());
      if (alone && sent > 0) break;
      if (!publish_suspect(*b)) break;
      ++sent;
      if (alone) isolator_.alone();
    }
    if (sent >= isolator_.probe_size()) break;
  }
  amqp_.set_corked(false);
  isolator_.set_solo(sent > 0);
  return sent > 0;
}

namespace {
constexpr std::size_t kPumpBytes = 256 * 1024;
}  // namespace

bool BatchPublisher::publish_some(InflightBatch& b) {
  const StageCpu::Scope cpu(CpuStage::kPublish);  // acks read meanwhile go to kSettle
  const auto window = static_cast<std::size_t>(config_.publish_window);
  std::size_t sent = 0, bytes_since_pump = 0;
  // Full TCP segments: fewer sends for the relay, fewer receives for the broker. A
  // lone message needs no cork (rabbitmq-c sends its frames with MSG_MORE but the
  // last); corking it would cost two system calls for nothing.
  const bool cork = b.rows().size() - b.published() > 1;
  if (cork) amqp_.set_corked(true);
  while (b.has_unsent()) {
    if (isolator_.solo() || batches_.isolating()) break;  // a channel close came in meanwhile: suspects first
    // A blocked connection (resource alarm) is not read by the broker: publish no
    // more; the rest of the batch stays pending without counting an attempt.
    if (!amqp_.connected() || amqp_.blocked()) {
      b.stop_publishing();
      break;
    }
    if (batches_.outstanding() >= window) break;  // the loop waits for acks
    auto& row = b.rows()[b.next_unsent()];
    if (!window_has_room_for(row.payload_bytes)) break;
    if (row.invalid) {  // cannot be decoded: its own attempt; the rows behind it go on
      b.unpublishable_next(*row.invalid);
      continue;
    }
    // A row that closed the channel before goes alone, once all else is settled.
    if (isolator_.must_go_alone(row, clock_.now()) && batches_.outstanding() > 0) break;
    if (!row.payload_loaded && !load_payloads(b)) break;
    if (!publish_row(b, b.next_unsent())) break;
    b.sent_next();
    if (row.refused_before) {
      isolator_.set_solo(true);
      break;
    }
    // Read acks as they come, so the socket never backs up: every 64 messages, and
    // after every kPumpBytes of payload (a big message's write can block until the
    // broker has read the ones before it; their acks are the relay's progress).
    bytes_since_pump += row.payload_bytes;
    if (++sent % 64 == 0 || bytes_since_pump >= kPumpBytes) {
      reader_.pump();
      bytes_since_pump = 0;
    }
  }
  if (cork) amqp_.set_corked(false);  // flush before anything waits for the broker
  return sent > 0 || isolator_.solo();
}

// REQUIRES: b.suspects not empty. False when it cannot go out on this link: the
// batch's suspects then stay pending (no attempt).
bool BatchPublisher::publish_suspect(InflightBatch& b) {
  if (!amqp_.connected() || amqp_.blocked()) {
    b.drop_suspects();
    b.stop_publishing();
    return false;
  }
  const std::size_t i = b.next_suspect();
  b.pop_suspect();
  if (!b.rows()[i].payload_loaded) {
    try {
      b.store().load_payloads(b.rows(), i, 1);
      b.session_used();
    } catch (const std::exception& e) {
      // The session is gone or failing: the suspects stay pending (no attempt).
      spdlog::error("fetching a payload to publish alone failed: {}", outbox::one_line(e.what()));
      b.drop_suspects();
      b.stop_publishing();
      return false;
    }
  }
  return publish_row(b, i);
}

// Publishes row `i` and drops its payload. False when the connection is lost
// (every batch then stops publishing).
bool BatchPublisher::publish_row(InflightBatch& b, std::size_t i) {
  auto& row = b.rows()[i];
  OutboundMessage m{row.id,
                    &row.message_id,
                    &row.exchange,
                    &row.routing_key,
                    &row.type,
                    &row.content_type,
                    row.correlation_id ? &*row.correlation_id : nullptr,
                    &row.headers,
                    &row.payload,
                    &row.ordering_key,
                    row.key_seq,
                    row.created_unix_s};
  try {
    const auto tag = amqp_.publish(m);
    b.tracker().on_published(i, tag, row.message_id, row.payload_bytes);
    metrics_.on_published(tag);
  } catch (const UnpublishableMessage& e) {
    // The row's own fault, nothing sent: an attempt for it; the rows behind it go on.
    b.tracker().on_unpublishable(i, "not publishable: " + outbox::one_line(e.what()));
  } catch (const UnencodableMessage& e) {
    // Its own fault too, but the client may have sent part of it: the connection
    // goes, and what else was outstanding is published again (no attempt).
    b.tracker().on_unpublishable(i, "not publishable: " + outbox::one_line(e.what()));
    reader_.link_lost("connection dropped after a message the AMQP client could not encode");
    return false;
  } catch (const AmqpError& e) {  // the socket failed (or the broker read nothing for confirm_timeout_ms)
    spdlog::warn(
        "AMQP connection lost while publishing: {}; the unconfirmed rows stay pending and are "
        "published again",
        outbox::one_line(e.what()));
    reader_.link_lost(outbox::one_line(e.what()));
    return false;
  }
  std::string().swap(row.payload);  // sent: keep only what settling needs
  row.payload_loaded = false;       // a suspect fetches it again
  b.timeline().published(i, clock_.now());
  return true;
}

// On a database error the rest of the batch is not published (it stays pending,
// without an attempt) and finishing the batch meets the same error.
bool BatchPublisher::load_payloads(InflightBatch& b) {
  try {
    b.store().load_payloads(b.rows(), b.published(), kPayloadChunkBytes);
    b.session_used();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("fetching payloads of a batch of {} rows failed: {}", b.rows().size(), outbox::one_line(e.what()));
    b.stop_publishing();
    return false;
  }
}

bool BatchPublisher::window_has_room_for(std::size_t bytes) const {
  const std::size_t unconfirmed = batches_.outstanding_bytes();
  return unconfirmed == 0 || unconfirmed + bytes <= static_cast<std::size_t>(config_.publish_window_bytes);
}

}  // namespace relay
