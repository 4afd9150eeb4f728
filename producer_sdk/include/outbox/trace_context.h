#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// W3C Trace Context (https://www.w3.org/TR/trace-context/): the traceparent and
// tracestate values a message carries so consumers continue the producer's trace.

#include <string>

namespace outbox {

// Checks a traceparent: "VV-<32 hex trace id>-<16 hex parent id>-<2 hex flags>",
// lower-case hex; version ff, an all-zero trace id or parent id are invalid. A
// version above 00 may carry more fields after a '-' (as the spec allows), up to
// 4096 bytes in all (kHeaderValueMax: the row stores it as a header value).
// Throws ValidationError naming `field`. Pure; thread-safe.
void validate_traceparent(const std::string& value, const std::string& field = "traceparent");

// Checks a tracestate: at most 32 comma-separated key=value members (empty members
// and spaces around commas allowed), 512 bytes in all, keys as the spec defines
// them (lcalpha start, or tenant@system), no key twice, values of printable ASCII
// without ',' or '=' and not ending in a space. Throws ValidationError naming `field`.
void validate_tracestate(const std::string& value, const std::string& field = "tracestate");

}  // namespace outbox
