#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// AMQP wire limits shared by the producer SDK (which refuses what cannot be sent)
// and the relay (which checks every row again before it publishes it).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace outbox {

// The AMQP frame size the relay asks for at login (amqp.frame_max) and the size the
// SDK checks messages against by default. rabbitmq-c encodes a message's whole
// content header (properties and header table) into one frame: a header that does
// not fit cannot be sent at all.
constexpr std::size_t kDefaultFrameMax = 131072;
// The smallest frame_max AMQP 0-9-1 allows.
constexpr std::size_t kMinFrameMax = 4096;

// The relay's own headers: the row's id, and a keyed row's key and its sequence
// number (migration 0016), for consumers that check order and completeness per key.
inline constexpr const char* kRowIdHeader = "x-outbox-id";    // signed 64-bit
inline constexpr const char* kKeyHeader = "x-outbox-key";     // long string: the ordering key
inline constexpr const char* kKeySeqHeader = "x-outbox-seq";  // signed 64-bit, from 1 per key

// The properties of one message as the relay sends them: every shortstr property it
// sets, and the header table (string values) without the relay's own entries.
struct WireProperties {
  const std::string* content_type = nullptr;
  const std::string* message_id = nullptr;
  const std::string* type = nullptr;
  const std::string* correlation_id = nullptr;  // may be null
  const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
  // Null or empty: no key, so no x-outbox-key and x-outbox-seq entries.
  const std::string* ordering_key = nullptr;
};

// Bytes of the content-header frame rabbitmq-c writes for `p` (frame envelope,
// class/weight/body size/flags, delivery mode, timestamp, shortstr properties, and
// the header table including the relay's entries: x-outbox-id, and for a keyed
// message x-outbox-key and x-outbox-seq). A message can be published only if this is
// at most the connection's frame_max. Pure.
std::size_t content_header_frame_bytes(const WireProperties& p);

}  // namespace outbox
