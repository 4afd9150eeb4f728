// The JSON-lines log format: every message becomes a valid JSON string body.
#include "ops/logging.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "outbox/json_log.h"
#include "outbox/log_fields.h"

using outbox::json_escaped;

namespace {

std::string round_trip(const std::string& text) {
  return nlohmann::json::parse("\"" + json_escaped(text) + "\"").get<std::string>();
}

// Logs `message` through json_log_formatter and returns the line as parsed JSON.
nlohmann::json logged_line(const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("fields", sink);
  logger.set_formatter(outbox::json_log_formatter());
  logger.warn("{}", message);
  logger.flush();
  return nlohmann::json::parse(out.str());
}

}  // namespace

TEST_CASE("quotes, backslashes and control bytes are escaped and read back unchanged") {
  for (const std::string& text : {std::string("plain"), std::string("say \"hi\" \\ there"),
                                  std::string("tab\there\nline\x01\x1f\x7f"), std::string("")})
    CHECK(round_trip(text) == text);
}

TEST_CASE("valid UTF-8 is kept and stray bytes become U+FFFD, so the line stays valid JSON") {
  CHECK(round_trip("Grüße, 東京, 🚀") == "Grüße, 東京, 🚀");
  CHECK(json_escaped("a\xff"
                     "b") == "a\\ufffdb");
  CHECK(json_escaped("\xc3") == "\\ufffd");                        // truncated sequence
  CHECK(json_escaped("\xc0\xaf") == "\\ufffd\\ufffd");             // overlong '/'
  CHECK(json_escaped("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");  // a surrogate
  nlohmann::json parsed;
  CHECK_NOTHROW(parsed = nlohmann::json::parse("\"" + json_escaped("x\xfe\xc3(\xe2\x82") + "\""));
}

TEST_CASE("log fields in scope are written beside msg, typed, nested, and gone after the scope") {
  using outbox::LogFields;
  {
    LogFields outer{{"consumer", "billing#0"}, {"attempt", 1}};
    {
      LogFields inner{{"message_id", "0191-x"}, {"row_id", std::int64_t{42}}, {"attempt", 3}};
      auto j = logged_line("row 42 parked");
      CHECK(j["msg"] == "row 42 parked");
      CHECK(j["level"] == "warning");
      CHECK(j["consumer"] == "billing#0");
      CHECK(j["message_id"] == "0191-x");
      CHECK(j["row_id"] == 42);
      CHECK(j["attempt"] == 3);  // the inner scope's value wins
    }
    auto j = logged_line("after the inner scope");
    CHECK(j["attempt"] == 1);
    CHECK_FALSE(j.contains("row_id"));
  }
  CHECK(logged_line("no scope").size() == 4);  // time, level, pid, msg
}

TEST_CASE("a field value cannot forge a line or a key, and a field named like a fixed key is renamed") {
  outbox::LogFields fields{{"reason", "bad\n{\"level\":\"info\"}\x01"}, {"msg", "shadow"}};
  auto j = logged_line("readable");
  CHECK(j["msg"] == "readable");
  CHECK(j["field_msg"] == "shadow");
  CHECK(j["level"] == "warning");
  const std::string reason = j["reason"];
  CHECK(reason.find('\n') == std::string::npos);  // one_line escaped it
  CHECK(reason.find("\\n") != std::string::npos);
}

TEST_CASE("each log.level becomes the spdlog level of the same name") {
  CHECK(relay::spdlog_level(relay::LogLevel::kTrace) == spdlog::level::trace);
  CHECK(relay::spdlog_level(relay::LogLevel::kDebug) == spdlog::level::debug);
  CHECK(relay::spdlog_level(relay::LogLevel::kInfo) == spdlog::level::info);
  CHECK(relay::spdlog_level(relay::LogLevel::kWarn) == spdlog::level::warn);
  CHECK(relay::spdlog_level(relay::LogLevel::kError) == spdlog::level::err);
}
