#pragma once
// Logging setup for the relay (spdlog to stderr).

#include <string>
#include <string_view>

#include "config.h"

namespace relay {

// Sets the level and the format (text, or one JSON object per line: time, level,
// pid, msg) of the default logger. Messages are expected to be one line already
// (see one_line) and never to hold a secret or a payload.
void setup_logging(const LogConfig& config);

// `text` as the inside of a JSON string: quotes, backslashes and control bytes
// escaped, valid UTF-8 kept, any other byte replaced by \ufffd. Pure.
std::string json_escaped(std::string_view text);

}  // namespace relay
