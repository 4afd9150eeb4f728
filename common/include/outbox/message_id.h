#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// MessageId: a UUID, generated once per message at enqueue (UUIDv7, time ordered).

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace outbox {

// A 128-bit message id. Value type; thread-safe to copy and compare.
class MessageId {
 public:
  // A new UUIDv7: 48-bit Unix milliseconds, then a 12-bit counter that keeps ids
  // from one process strictly increasing within a millisecond, then 62 random bits.
  // Thread-safe.
  static MessageId generate_v7();

  // Parses the canonical 8-4-4-4-12 hex form (either case).
  // Throws ValidationError naming `field` when malformed.
  static MessageId parse(std::string_view text, const std::string& field = "message_id");
  // Parses like parse() and also refuses (ValidationError naming `field`) the nil UUID
  // (all zeros) and the max UUID (all ones), sentinels that name no message: a sender
  // stamping them on every message would have all but its first acked as duplicates
  // by an inbox, and lost. For an id given to a message (producer) or read from one
  // (consumer); parse() still addresses a row that already carries one (admin tools).
  static MessageId parse_distinct(std::string_view text, const std::string& field = "message_id");

  // The nil or the max UUID (RFC 9562 sections 5.9 and 5.10).
  bool is_sentinel() const;

  // Lower-case canonical form.
  std::string to_string() const;
  int version() const { return bytes_[6] >> 4; }
  // Milliseconds since the Unix epoch, for a v7 id.
  std::uint64_t unix_ms() const;
  const std::array<std::uint8_t, 16>& bytes() const { return bytes_; }

  auto operator<=>(const MessageId&) const = default;

 private:
  std::array<std::uint8_t, 16> bytes_{};
};

}  // namespace outbox
