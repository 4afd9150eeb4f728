#include "outbox/message.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "outbox/error_text.h"
#include "outbox/errors.h"
#include "outbox/header_rules.h"
#include "outbox/message_id.h"
#include "outbox/trace_context.h"

namespace outbox {
namespace {

constexpr std::size_t kShortStrMax = 255;  // AMQP shortstr
// What the relay sends as the message id: the row's uuid as text.
constexpr std::size_t kMessageIdTextBytes = 36;

// Quotes at most 64 bytes of a user value for an error message, escaped.
std::string shown(const std::string& v) { return quoted_value(v, 64); }

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code
// points above U+10FFFF included), or npos. Text columns and AMQP strings need
// valid UTF-8: PostgreSQL refuses the row otherwise, and the headers' JSON too.
std::size_t invalid_utf8_at(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return i;
    std::uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const std::uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

void require_utf8(const std::string& field, const std::string& value) {
  if (auto at = invalid_utf8_at(value); at != std::string::npos)
    throw ValidationError(field, "is not valid UTF-8 (at byte " + std::to_string(at) + ")");
}

// Text the row stores in a text column or in its headers' JSON: neither holds a NUL
// or bytes that are not UTF-8 (PostgreSQL would refuse the row, aborting the caller's
// transaction, or the JSON encoder would throw).
void require_text(const std::string& field, const std::string& value) {
  if (value.find('\0') != std::string::npos) throw ValidationError(field, "must not contain NUL bytes");
  require_utf8(field, value);
}

void require_short(const std::string& field, const std::string& value, bool required) {
  if (required && value.empty()) throw ValidationError(field, "must not be empty");
  if (value.size() > kShortStrMax)
    throw ValidationError(field, "is " + std::to_string(value.size()) + " bytes, at most 255 allowed: " + shown(value));
  require_text(field, value);
}

// The relay sends exchange, routing key, type, content type and correlation id as AMQP
// fields that consumers route on and log: no C0 control (CR, LF, TAB, ESC, ...), DEL
// or C1 control (U+0080-U+009F, C2 80-9F in UTF-8; a terminal in UTF-8 mode acts on
// U+009B as on ESC [). The outbox table's rule outbox_control_characters (migration
// 0015) and enqueue() refuse the same. Call after require_short: valid UTF-8.
void require_no_controls(const std::string& field, const std::string& value) {
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool c1 = c == 0xC2 && i + 1 < value.size() && static_cast<unsigned char>(value[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1)
      throw ValidationError(field, "holds a control character (U+0000-U+001F, U+007F-U+009F): " + shown(value));
  }
}

// An AMQP field the relay sends: a short string without control characters.
void require_wire_text(const std::string& field, const std::string& value, bool required) {
  require_short(field, value, required);
  require_no_controls(field, value);
}

bool valid_header_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

void validate_header(const std::string& name, const std::string& value) {
  const std::string field = "headers[" + shown(name) + "]";
  if (name.empty() || name.size() > kHeaderNameMax)
    throw ValidationError(field, "header name must be 1-128 characters");
  for (char c : name)
    if (!valid_header_name_char(c)) throw ValidationError(field, "header name may only use [A-Za-z0-9_.-]");
  if (auto reserved = reserved_header(name))
    throw ValidationError(field, "header name " + shown(name) + " is reserved: " + std::string(reserved->why));
  if (name == "traceparent" || name == "tracestate")
    throw ValidationError(field, "set the trace context with Message::" + name + ", not as a header");
  if (value.size() > kHeaderValueMax)
    throw ValidationError(field, "header value is " + std::to_string(value.size()) + " bytes, at most 4096 allowed");
  require_text(field, value);
}

// The headers as the relay sends them: the application's and the trace context
// (the writer stores both in the row's headers).
std::vector<std::pair<std::string, std::string>> sent_headers(const Message& m) {
  std::vector<std::pair<std::string, std::string>> all(m.headers.begin(), m.headers.end());
  if (m.traceparent) all.emplace_back("traceparent", *m.traceparent);
  if (m.tracestate) all.emplace_back("tracestate", *m.tracestate);
  return all;
}

// The relay cannot send a message whose content header does not fit one frame, and
// the table's CHECK outbox_headers_size refuses headers above kMaxHeadersBytes
// whatever the frame_max.
void check_header_frame(const Message& m, const MessageLimits& limits) {
  const auto headers = sent_headers(m);
  const std::string id_text(kMessageIdTextBytes, '0');
  WireProperties wire;
  wire.content_type = &m.content_type;
  wire.message_id = &id_text;
  wire.type = &m.type.value();
  wire.correlation_id = m.correlation_id ? &*m.correlation_id : nullptr;
  wire.headers = &headers;
  wire.ordering_key = &m.ordering_key;  // a keyed row is sent with its key and sequence
  const auto frame = content_header_frame_bytes(wire);
  if (frame > limits.frame_max)
    throw ValidationError("headers", "the message's AMQP header frame would be " + std::to_string(frame) +
                                         " bytes, above frame_max " + std::to_string(limits.frame_max));
  const auto entries = header_entries_bytes(headers);
  if (entries > kMaxHeadersBytes)
    throw ValidationError("headers", "the headers would take " + std::to_string(entries) +
                                         " bytes of the AMQP header table, above the " +
                                         std::to_string(kMaxHeadersBytes) + " an outbox row may hold");
}

}  // namespace

void validate_message(const Message& m, const MessageLimits& limits) {
  if (limits.frame_max < kMinFrameMax)
    throw ValidationError("frame_max", "is " + std::to_string(limits.frame_max) + ", AMQP allows no less than " +
                                           std::to_string(kMinFrameMax));
  require_wire_text("exchange", m.exchange.value(), true);
  require_wire_text("routing_key", m.routing_key.value(), true);
  require_wire_text("type", m.type.value(), true);
  require_short("ordering_key", m.ordering_key, false);  // sent as the header x-outbox-key: any text
  require_wire_text("content_type", m.content_type, true);
  if (m.correlation_id) require_wire_text("correlation_id", *m.correlation_id, true);
  if (m.message_id) MessageId::parse_distinct(*m.message_id, "message_id");
  if (m.payload.size() > limits.max_payload_bytes)
    throw ValidationError("payload", "is " + std::to_string(m.payload.size()) + " bytes, above the maximum of " +
                                         std::to_string(limits.max_payload_bytes));
  for (const auto& [name, value] : m.headers) validate_header(name, value);
  if (m.traceparent) {
    // A later version's fields after the flags are free-form: the syntax leaves them be.
    require_text("traceparent", *m.traceparent);
    validate_traceparent(*m.traceparent);
  }
  if (m.tracestate) {
    if (!m.traceparent) throw ValidationError("tracestate", "needs a traceparent");
    validate_tracestate(*m.tracestate);
  }
  check_header_frame(m, limits);
  if (m.deliver_after && m.deliver_at)
    throw ValidationError("deliver_after", "is set together with deliver_at: give one of them");
  if (m.deliver_after && m.deliver_after->count() < 0)
    throw ValidationError("deliver_after",
                          "is " + std::to_string(m.deliver_after->count()) + " us, a delay must not be negative");
}

}  // namespace outbox
