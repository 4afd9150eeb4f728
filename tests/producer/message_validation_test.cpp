#include <doctest/doctest.h>

#include <set>
#include <thread>

#include "outbox/errors.h"
#include "outbox/message.h"
#include "outbox/message_id.h"
#include "outbox/outbox_writer.h"
#include "outbox/pg_array.h"
#include "outbox/sql_identifier.h"

using namespace outbox;

namespace {

Message valid_message() {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = R"({"order_id":42})";
  return m;
}

// The field named by the ValidationError `fn` throws.
template <class Fn>
std::string rejected_field(Fn fn) {
  try {
    fn();
  } catch (const ValidationError& e) {
    return e.field();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("a well-formed message passes validation") {
  CHECK_NOTHROW(validate_message(valid_message(), MessageLimits{}));
}

TEST_CASE("an empty exchange or routing key is rejected naming the field") {
  auto m = valid_message();
  m.exchange = Exchange("");
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "exchange");
  m = valid_message();
  m.routing_key = RoutingKey("");
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "routing_key");
  m = valid_message();
  m.type = MessageType("");
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "type");
}

TEST_CASE("names longer than an AMQP short string are rejected") {
  auto m = valid_message();
  m.routing_key = RoutingKey(std::string(256, 'k'));
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "routing_key");
  m.routing_key = RoutingKey(std::string(255, 'k'));
  CHECK_NOTHROW(validate_message(m, {}));
}

TEST_CASE("a payload above the configured maximum is rejected with both sizes") {
  auto m = valid_message();
  m.payload = std::string(1001, 'x');
  try {
    validate_message(m, MessageLimits{1000});
    FAIL("accepted an oversize payload");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "payload");
    CHECK(std::string(e.what()).find("1001") != std::string::npos);
    CHECK(std::string(e.what()).find("1000") != std::string::npos);
  }
  m.payload = std::string(1000, 'x');
  CHECK_NOTHROW(validate_message(m, MessageLimits{1000}));
}

TEST_CASE("invalid header names and values are rejected naming the header") {
  for (std::string bad : std::vector<std::string>{"", "has space", "semi;colon", "ünïcode", "x-outbox-id", std::string(129, 'h')}) {
    auto m = valid_message();
    m.headers[bad] = "v";
    CHECK_MESSAGE(rejected_field([&] { validate_message(m, {}); }).rfind("headers[", 0) == 0, bad);
  }
  auto m = valid_message();
  m.headers["tenant"] = std::string("a\0b", 3);
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "headers['tenant']");
  m.headers["tenant"] = std::string(4097, 'v');
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "headers['tenant']");
  m.headers["tenant"] = "acme";
  CHECK_NOTHROW(validate_message(m, {}));
}

TEST_CASE("a malformed message id is rejected, a canonical one accepted") {
  auto m = valid_message();
  for (std::string bad : {"", "42", "0190b2b2-7c1e-7abc-8def-00000000000", "0190b2b2x7c1e-7abc-8def-000000000000",
                          "0190b2b2-7c1e-7abc-8def-00000000000g"}) {
    m.message_id = bad;
    CHECK_MESSAGE(rejected_field([&] { validate_message(m, {}); }) == "message_id", bad);
  }
  m.message_id = "0190B2B2-7C1E-7ABC-8DEF-000000000001";
  CHECK_NOTHROW(validate_message(m, {}));
}

TEST_CASE("a UUIDv7 has version 7, variant 10 and the current time") {
  auto before = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  auto id = MessageId::generate_v7();
  auto text = id.to_string();
  CHECK(text.size() == 36);
  CHECK(text[14] == '7');
  CHECK(std::string("89ab").find(text[19]) != std::string::npos);
  CHECK(id.version() == 7);
  CHECK(id.unix_ms() >= before);
  CHECK(id.unix_ms() <= before + 1000);
  CHECK(MessageId::parse(text) == id);
}

TEST_CASE("UUIDv7 ids from one process are strictly increasing, also across threads") {
  std::vector<MessageId> ids;
  for (int i = 0; i < 20000; ++i) ids.push_back(MessageId::generate_v7());
  for (std::size_t i = 1; i < ids.size(); ++i) REQUIRE(ids[i - 1] < ids[i]);
  CHECK(ids.front().to_string() < ids.back().to_string());  // text order = byte order

  std::vector<std::vector<MessageId>> per_thread(4);
  std::vector<std::thread> threads;
  for (auto& v : per_thread)
    threads.emplace_back([&v] { for (int i = 0; i < 5000; ++i) v.push_back(MessageId::generate_v7()); });
  for (auto& t : threads) t.join();
  std::set<MessageId> all;
  for (auto& v : per_thread) all.insert(v.begin(), v.end());
  CHECK(all.size() == 20000);
}

TEST_CASE("hostile schema names are refused before they reach SQL") {
  for (std::string bad : std::vector<std::string>{"", "Outbox", "a;drop table x", "a\"b", "sch ema", "schéma", std::string(64, 'a'), "1abc"}) {
    CHECK_THROWS_AS(quoted_identifier(bad, "postgres.schema"), ValidationError);
  }
  CHECK(quoted_identifier("outbox_1", "postgres.schema") == "\"outbox_1\"");
}

TEST_CASE("array literals escape quotes and backslashes and encode bytes as hex") {
  CHECK(pg::text_array(std::vector<std::string>{"a", "b\"c", "d\\e"}) == R"({"a","b\"c","d\\e"})");
  CHECK(pg::text_array(std::vector<std::optional<std::string>>{std::string("x"), std::nullopt}) == R"({"x",NULL})");
  CHECK(pg::bigint_array({1, -2, 3}) == "{1,-2,3}");
  std::string bytes("\x00\xff", 2);
  CHECK(pg::bytea_array({bytes}) == R"({"\\x00ff"})");
}

TEST_CASE("text that is not valid UTF-8 is rejected naming the field, before anything is written") {
  for (std::string bad : {std::string("\xff"), std::string("caf\xc3"), std::string("\xc0\xaf"),  // truncated, overlong
                          std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80")}) {      // surrogate, > U+10FFFF
    auto m = valid_message();
    m.headers["tenant"] = bad;
    CHECK(rejected_field([&] { validate_message(m, {}); }) == "headers['tenant']");
    m = valid_message();
    m.routing_key = RoutingKey("order." + bad);
    CHECK(rejected_field([&] { validate_message(m, {}); }) == "routing_key");
    m = valid_message();
    m.correlation_id = bad;
    CHECK(rejected_field([&] { validate_message(m, {}); }) == "correlation_id");
  }
  auto m = valid_message();
  m.headers["tenant"] = "Grüße, 東京, \xf0\x9f\x98\x80";  // valid multi-byte text passes
  m.ordering_key = "köln-1";
  CHECK_NOTHROW(validate_message(m, {}));
  m.payload = std::string("\xff\x00\xfe", 3);  // the payload is bytes: anything goes
  CHECK_NOTHROW(validate_message(m, {}));
}

TEST_CASE("a writer for a hostile schema name is refused before it can reach SQL") {
  for (std::string bad : {"outbox\"; DROP TABLE orders; --", "out'box", "schéma", "a;b"})
    CHECK_THROWS_AS(OutboxWriter(WriterOptions{bad, {}}), ValidationError);
}
