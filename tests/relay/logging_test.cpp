// The JSON-lines log format: every message becomes a valid JSON string body.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "logging.h"

using relay::json_escaped;

namespace {

std::string round_trip(const std::string& text) {
  return nlohmann::json::parse("\"" + json_escaped(text) + "\"").get<std::string>();
}

}  // namespace

TEST_CASE("quotes, backslashes and control bytes are escaped and read back unchanged") {
  for (const std::string& text : {std::string("plain"), std::string("say \"hi\" \\ there"),
                                 std::string("tab\there\nline\x01\x1f\x7f"), std::string("")})
    CHECK(round_trip(text) == text);
}

TEST_CASE("valid UTF-8 is kept and stray bytes become U+FFFD, so the line stays valid JSON") {
  CHECK(round_trip("Grüße, 東京, 🚀") == "Grüße, 東京, 🚀");
  CHECK(json_escaped("a\xff" "b") == "a\\ufffdb");
  CHECK(json_escaped("\xc3") == "\\ufffd");                  // truncated sequence
  CHECK(json_escaped("\xc0\xaf") == "\\ufffd\\ufffd");       // overlong '/'
  CHECK(json_escaped("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");  // a surrogate
  CHECK_NOTHROW(nlohmann::json::parse("\"" + json_escaped("x\xfe\xc3(\xe2\x82") + "\""));
}
