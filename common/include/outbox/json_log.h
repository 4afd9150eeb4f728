#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// The JSON log format shared by the relay and the consumer SDK: one object per
// line with time, level, pid and a readable msg, then the LogFields in scope.

#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

namespace outbox {

// A formatter for spdlog::set_formatter: {"time":"...","level":"warning","pid":1,
// "msg":"...", "row_id":42,"message_id":"...",...} per line. A field named like a
// fixed key (time, level, pid, msg) is written as "field_<name>" so a line never
// has a key twice. Messages are expected to be one line already (one_line).
std::unique_ptr<spdlog::formatter> json_log_formatter();

// `text` as the inside of a JSON string: quotes, backslashes and control bytes
// escaped, valid UTF-8 kept, any other byte replaced by \ufffd. Pure.
std::string json_escaped(std::string_view text);

}  // namespace outbox
