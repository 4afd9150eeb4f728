#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Message: what a producer hands to OutboxWriter::enqueue.

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "outbox/amqp_wire.h"
#include "outbox/types.h"

namespace outbox {

struct Message {
  // Exchange, routing key, type, content type and correlation id are sent as AMQP
  // fields: at most 255 bytes each, and no control character (U+0000-U+001F,
  // U+007F-U+009F), as the outbox table's row rules require.
  Exchange exchange;       // AMQP exchange; required
  RoutingKey routing_key;  // required
  MessageType type;        // event type, e.g. "OrderPlaced"; required
  // Aggregate id (e.g. the order id); may be empty. Messages of one key are published
  // in order, and each gets the key's next sequence number at enqueue (migration
  // 0016), sent with the key as the headers x-outbox-key and x-outbox-seq.
  std::string ordering_key;
  std::string payload;                            // opaque bytes, sent as the message body unchanged
  std::string content_type = "application/json";  // required
  // Application headers. Names: 1-128 of [A-Za-z0-9_.-], none the relay or RabbitMQ
  // reserves (x-outbox-*, CC, BCC, x-death, ...: outbox/header_rules.h). Values: at
  // most 4096 bytes, no NUL. With the trace context they take at most 130048 bytes
  // of the AMQP header table, and the message's content header must fit frame_max.
  std::map<std::string, std::string> headers;
  std::optional<std::string> correlation_id;  // when set, not empty
  // Canonical UUID text, neither the nil nor the max UUID (they name no message).
  // Leave empty to have one assigned (UUIDv7) at enqueue; set it to keep an id the
  // caller already handed out. Either way it never changes later.
  std::optional<std::string> message_id;
  // W3C trace context of the caller's span (outbox/trace_context.h has the rules).
  // Stored with the row; the relay sends them as the AMQP headers `traceparent` and
  // `tracestate`, so a consumer continues the trace. tracestate needs traceparent.
  // Set them here rather than in `headers`, which refuses those two names.
  std::optional<std::string> traceparent;
  std::optional<std::string> tracestate;
  // Scheduled delivery (migration 0018): the relay publishes the message at or after
  // this time, not before; a time already past means at once. Compared with the
  // database server's clock, so a producer host's clock skew shifts it. With per_key
  // ordering it holds back the later messages of its ordering key until it is
  // published (docs/SQL-CONTRACT.md, "Scheduled delivery").
  std::optional<std::chrono::system_clock::time_point> deliver_at;
  // The same as a delay from the enqueue statement, by the database server's clock
  // (no skew). At least 0; set at most one of the two.
  std::optional<std::chrono::microseconds> deliver_after;
};

// Limits applied by validate_message.
struct MessageLimits {
  std::size_t max_payload_bytes = 1024 * 1024;  // 1 MiB
  // The relay's amqp.frame_max: RabbitMQ takes a message's whole content header
  // (properties and headers) in one frame, so a message whose header does not fit
  // can never be sent. At least kMinFrameMax (4096).
  std::size_t frame_max = kDefaultFrameMax;
};

// Throws ValidationError naming the first field at fault. Pure; thread-safe.
void validate_message(const Message& message, const MessageLimits& limits);

}  // namespace outbox
