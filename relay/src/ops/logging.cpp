#include "ops/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "outbox/json_log.h"

namespace relay {

void setup_logging(const LogConfig& config) {
  auto logger = spdlog::stderr_logger_mt("outbox-relay");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.level));
  if (config.format == "json") {
    spdlog::set_formatter(outbox::json_log_formatter());
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%P] %v");
  }
}

}  // namespace relay
