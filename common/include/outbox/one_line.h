#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// one_line: makes any text (errors, broker replies, handler messages) safe for a
// single log line or last_error. The relay and the consumer SDK share it.

#include <string>
#include <string_view>

namespace outbox {

// Escapes CR, LF and other control characters (\r, \n, \xNN), bytes that are not
// well-formed UTF-8 (\xNN), and characters that steer a terminal or the direction of
// text (C1 controls such as U+009B CSI, bidirectional overrides and isolates, U+2028:
// each byte as \xNN), so row text shown by an admin command or a log cannot act on the
// operator's terminal or disguise itself; and caps the length without cutting a character: the
// result is valid UTF-8 (a PostgreSQL text value) whatever came in,
// so an error can never forge or split a log line. Trailing white space (libpq ends
// its messages with a newline) is dropped. A PostgreSQL error's DETAIL line and
// what follows are dropped too: they quote row data (payloads, headers, keys).
// Pure; thread-safe.
std::string one_line(std::string_view text, std::size_t max_bytes = 1000);

}  // namespace outbox
