#include "logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace relay {
namespace {

// %v with JSON string escaping, for the json format.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static const char* digits = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', digits[(c >> 4) & 0xF], digits[c & 0xF]};
        dest.append(esc, esc + 6);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

}  // namespace

void setup_logging(const LogConfig& config) {
  auto logger = spdlog::stderr_logger_mt("outbox-relay");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.level));
  if (config.format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","pid":%P,"msg":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%P] %v");
  }
}

}  // namespace relay
