#include "outbox/message_id.h"

#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>

#include "outbox/error_text.h"
#include "outbox/errors.h"

namespace outbox {
namespace {

void random_bytes(std::uint8_t* out, int n) {
  if (RAND_bytes(out, n) != 1) throw std::runtime_error("RAND_bytes failed");
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Milliseconds and a 12-bit sequence that never go backwards in this process, so
// ids generated here are strictly increasing even within one millisecond.
struct V7Clock {
  std::mutex mu;
  std::uint64_t last_ms = 0;
  std::uint16_t seq = 0;

  std::pair<std::uint64_t, std::uint16_t> next() {
    auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    std::lock_guard lock(mu);
    if (now > last_ms) {
      last_ms = now;
      std::uint8_t r[2];
      random_bytes(r, 2);
      seq = static_cast<std::uint16_t>(((r[0] << 8) | r[1]) & 0x03FF);  // leave headroom
    } else if (++seq > 0x0FFF) {
      ++last_ms;  // counter exhausted: borrow the next millisecond
      seq = 0;
    }
    return {last_ms, seq};
  }
};

}  // namespace

MessageId MessageId::generate_v7() {
  static V7Clock clock;
  auto [ms, seq] = clock.next();
  MessageId id;
  auto& b = id.bytes_;
  for (int i = 0; i < 6; ++i) b[i] = static_cast<std::uint8_t>(ms >> (8 * (5 - i)));
  b[6] = static_cast<std::uint8_t>(0x70 | ((seq >> 8) & 0x0F));
  b[7] = static_cast<std::uint8_t>(seq & 0xFF);
  random_bytes(&b[8], 8);
  b[8] = static_cast<std::uint8_t>(0x80 | (b[8] & 0x3F));  // RFC 9562 variant 10
  return id;
}

MessageId MessageId::parse(std::string_view text, const std::string& field) {
  auto fail = [&] { throw ValidationError(field, "not a UUID in 8-4-4-4-12 hex form: " + quoted_value(text, 64)); };
  if (text.size() != 36) fail();
  MessageId id;
  int nibble = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') fail();
      continue;
    }
    int v = hex_value(text[i]);
    if (v < 0) fail();
    auto& byte = id.bytes_[nibble / 2];
    byte = static_cast<std::uint8_t>(nibble % 2 == 0 ? v << 4 : byte | v);
    ++nibble;
  }
  return id;
}

MessageId MessageId::parse_distinct(std::string_view text, const std::string& field) {
  MessageId id = parse(text, field);
  if (id.is_sentinel())
    throw ValidationError(field, "is the " + std::string(id.bytes_[0] == 0 ? "nil" : "max") + " UUID " +
                                     quoted_value(text, 64) +
                                     ", which names no message: an inbox would take every later message "
                                     "carrying it for a duplicate");
  return id;
}

bool MessageId::is_sentinel() const {
  auto all = [&](std::uint8_t v) { return std::all_of(bytes_.begin(), bytes_.end(), [v](auto b) { return b == v; }); };
  return all(0x00) || all(0xFF);
}

std::string MessageId::to_string() const {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(digits[bytes_[i] >> 4]);
    out.push_back(digits[bytes_[i] & 0x0F]);
  }
  return out;
}

std::uint64_t MessageId::unix_ms() const {
  std::uint64_t ms = 0;
  for (int i = 0; i < 6; ++i) ms = (ms << 8) | bytes_[i];
  return ms;
}

}  // namespace outbox
