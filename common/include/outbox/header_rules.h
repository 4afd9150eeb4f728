#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Header rules: the AMQP header names and sizes an outbox row may carry. The SDK
// refuses a message that breaks them (validate_message); migration 0007 holds the
// same rules as CHECK constraints on the outbox table, for rows written around the
// SDK. Change one only together with the other (a new migration).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

constexpr std::size_t kHeaderNameMax = 128;    // bytes; names are [A-Za-z0-9_.-]
constexpr std::size_t kHeaderValueMax = 4096;  // bytes
// The most bytes a row's headers may take in the AMQP header table (see
// header_entries_bytes): the default frame_max (131072) less 1 KiB, which is more
// than everything else in the content-header frame takes at most (861 bytes: frame
// envelope, x-outbox-id, 255-byte type, content type and correlation id). So a row
// within it fits the default frame whatever its properties. The table's CHECK
// outbox_headers_size holds the same bound: a CHECK cannot know the frame_max.
constexpr std::size_t kMaxHeadersBytes = 130048;

// A header name the relay or RabbitMQ reserves: `name` equal to it, or starting
// with it when `prefix`.
struct ReservedHeader {
  std::string_view name;
  bool prefix;
  std::string_view why;  // completes "header name 'N' is reserved: "
};

// Every reserved name, case-sensitive as RabbitMQ reads them: the relay's x-outbox-*,
// and the headers RabbitMQ interprets on publish (CC, BCC, x-stream-filter-value,
// the delayed-message plugin's x-delay) or sets itself (x-death, x-delivery-count,
// ...). Pure; thread-safe.
const std::vector<ReservedHeader>& reserved_headers();

// The entry of reserved_headers() that `name` falls under, or nullopt.
std::optional<ReservedHeader> reserved_header(std::string_view name);

// Bytes the headers' entries take in an AMQP field table of string values (per
// entry: name length (1), name, type (1), value length (4), value), without the
// table's own length prefix and the relay's x-outbox-id entry. Pure.
std::size_t header_entries_bytes(const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace outbox
