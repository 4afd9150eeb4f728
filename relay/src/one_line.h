#pragma once
// one_line: makes any text safe for a single log line or last_error.

#include <string>
#include <string_view>

namespace relay {

// Escapes CR, LF and other control characters (\r, \n, \xNN) and caps the length,
// so an error can never forge or split a log line. Trailing white space (libpq ends
// its messages with a newline) is dropped. A PostgreSQL error's DETAIL line and
// what follows are dropped too: they quote row data (payloads, headers, keys).
std::string one_line(std::string_view text, std::size_t max_bytes = 1000);

}  // namespace relay
