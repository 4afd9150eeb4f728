#include "ops/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "outbox/json_log.h"

namespace relay {

spdlog::level::level_enum spdlog_level(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
  }
  return spdlog::level::info;  // not reached: every LogLevel is named above
}

void setup_logging(const LogConfig& config) {
  auto logger = spdlog::stderr_logger_mt("outbox-relay");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog_level(config.level));
  if (config.format == LogFormat::kJson) {
    spdlog::set_formatter(outbox::json_log_formatter());
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%P] %v");
  }
}

}  // namespace relay
