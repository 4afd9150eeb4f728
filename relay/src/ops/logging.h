#pragma once
// Logging setup for the relay (spdlog to stderr).

#include <spdlog/common.h>

#include <string>
#include <string_view>

#include "config/config.h"

namespace relay {

// The spdlog level of a log.level. Pure.
spdlog::level::level_enum spdlog_level(LogLevel level);

// Sets the level and the format (text, or one JSON object per line: time, level,
// pid, msg and the LogFields in scope, outbox::json_log_formatter) of the default
// logger. Messages are expected to be one line already (see one_line) and never
// to hold a secret or a payload.
void setup_logging(const LogConfig& config);

}  // namespace relay
