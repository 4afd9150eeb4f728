#pragma once
// Logging setup for the relay (spdlog to stderr).

#include "config.h"

namespace relay {

// Sets the level and the format (text, or one JSON object per line) of the default
// logger. Messages are expected to be one line already (see one_line).
void setup_logging(const LogConfig& config);

}  // namespace relay
