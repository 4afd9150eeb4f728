#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// How the SDKs put caller-supplied text into an error message. Callers log what()
// as it is; a value with CR/LF or other control bytes must not split or forge a log
// line, and a huge value must not flood it.

#include <cstddef>
#include <string>
#include <string_view>

namespace outbox {

// A caller's value quoted for an error message: 'value', with every byte outside
// printable ASCII escaped (\n, \r, \t, \xNN; and \\ and \' so the quoting cannot
// be forged either), at most `max_bytes` bytes of the value shown, then
// "... (N bytes)". Non-ASCII UTF-8 is escaped too: line and paragraph separators
// and bidi controls are non-printables as well. Pure; thread-safe.
std::string quoted_value(std::string_view value, std::size_t max_bytes = 64);

}  // namespace outbox
