#include "outbox/amqp_wire.h"

namespace outbox {
namespace {

// Frame header (type, channel, size: 7) and frame end (1), then the content
// header's class id (2), weight (2), body size (8) and property flags (2): the
// 22 bytes of the frame besides the encoded properties.
constexpr std::size_t kEnvelope = 7 + 1 + 2 + 2 + 8 + 2;
constexpr std::size_t kDeliveryMode = 1;
constexpr std::size_t kTimestamp = 8;
// x-outbox-id: key (1 + 11 bytes), type 'l' (1), signed 64-bit value (8).
constexpr std::size_t kRelayIdEntry = 1 + 11 + 1 + 8;
// x-outbox-seq: key (1 + 12), 'l' (1), 8; x-outbox-key: key (1 + 12), 'S' (1), length (4).
constexpr std::size_t kKeySeqEntry = 1 + 12 + 1 + 8;
constexpr std::size_t kKeyEntryWithoutKey = 1 + 12 + 1 + 4;

std::size_t shortstr(const std::string* s) { return s ? 1 + s->size() : 0; }

}  // namespace

std::size_t content_header_frame_bytes(const WireProperties& p) {
  std::size_t n = kEnvelope + kDeliveryMode + kTimestamp;
  n += shortstr(p.content_type) + shortstr(p.message_id) + shortstr(p.type) + shortstr(p.correlation_id);
  n += 4 + kRelayIdEntry;  // the table's length prefix and the relay's entry
  if (p.ordering_key && !p.ordering_key->empty()) n += kKeySeqEntry + kKeyEntryWithoutKey + p.ordering_key->size();
  if (p.headers)
    for (const auto& [name, value] : *p.headers) n += 1 + name.size() + 1 + 4 + value.size();  // key, 'S', longstr
  return n;
}

}  // namespace outbox
