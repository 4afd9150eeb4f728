#pragma once
// safe_text: makes any text (broker replies, handler errors) safe for one log line.

#include <string>
#include <string_view>

namespace outbox::detail {

// Escapes control characters (\n, \r, \xNN) and caps the length, so an error text
// can never split or forge a log line.
std::string safe_text(std::string_view text, std::size_t max_bytes = 500);

}  // namespace outbox::detail
