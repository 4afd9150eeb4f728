// PayloadJson: what the encryptor and decryptor refuse to parse because writing it
// out again would crash (depth) or change it (numbers a double cannot carry).
#include "outbox/payload_json.h"

#include <doctest/doctest.h>

#include <string>

using outbox::PayloadJson;

namespace {

std::string nested(std::size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

}  // namespace

TEST_CASE("a payload nested deeper than 128 levels is refused with the path where it goes too deep") {
  CHECK(PayloadJson(nested(PayloadJson::kMaxDepth), true).ok());
  PayloadJson deep(nested(PayloadJson::kMaxDepth + 1), true);
  CHECK_FALSE(deep.ok());
  CHECK(deep.problem() == "nested deeper than 128 levels");
  std::string path = "$";
  for (std::size_t i = 0; i < PayloadJson::kMaxDepth; ++i) path += "[0]";
  CHECK(deep.path() == path);
  // 40 000 levels overflowed the stack of nlohmann::json's recursive copy and dump.
  PayloadJson hostile("{\"x\":" + nested(40000) + "}", false);
  CHECK_FALSE(hostile.ok());
  CHECK(hostile.path().rfind("$.x[0][0]", 0) == 0);
}

TEST_CASE("numbers a double carries to the same decimal value are kept, however they are written") {
  for (const char* text : {"0", "-0.0", "0.1", "1.50", "1e2", "100.0", "-3.25e-7", "0.30000000000000004",
                           "1234567890123456", "5e-324", "1.7976931348623157e308", "9007199254740993"}) {
    INFO(std::string(text));
    PayloadJson p(std::string("{\"a\": [") + text + "]}", true);
    CHECK(p.ok());
  }
}

TEST_CASE("a number that would change when written again is refused with its path, without its digits") {
  for (const char* text : {"123456789012345678901", "1234567890123456.78", "0.12345678901234567891", "1e400", "-1e400",
                           "2.00000000000000000001"}) {
    INFO(std::string(text));
    PayloadJson p(std::string(R"({"order": {"lines": [{"price": 1}, {"price": )") + text + "}]}}", true);
    REQUIRE_FALSE(p.ok());
    CHECK(p.path() == "$.order.lines[1].price");
    CHECK(p.problem().find("send it as a string") != std::string::npos);
    CHECK(p.problem().find(text) == std::string::npos);
  }
  // Stored byte for byte (no sensitive fields), they need not be exact.
  CHECK(PayloadJson(R"({"n": 123456789012345678901})", false).ok());
}

TEST_CASE("text that is not JSON is refused as such") {
  for (const char* text : {"", "name=Ada", "{\"a\": }", "[1, 2", "{} {}"}) {
    INFO(std::string(text));
    PayloadJson p(text, true);
    CHECK_FALSE(p.ok());
    CHECK(p.problem() == "not valid JSON");
    CHECK(p.path() == "$");
  }
}
