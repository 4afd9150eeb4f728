#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <thread>

#include "outbox/errors.h"
#include "outbox/header_rules.h"
#include "outbox/message.h"
#include "outbox/message_id.h"
#include "outbox/outbox_writer.h"
#include "outbox/pg_array.h"
#include "outbox/sql_identifier.h"
#include "test_text.h"

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

TEST_CASE("a control character in a field the relay sends is refused naming the field and showing it escaped") {
  // CR, LF, TAB, ESC, DEL and the C1 controls U+0085 (NEL) and U+009B (CSI): each splits a
  // consumer's log line or acts on a terminal; the table's rule outbox_control_characters
  // refuses the same (outbox_row_checks_pgtest).
  for (const std::string bad : {"a\rb", "a\nb", "a\tb", "a\x1b[2Jb", "a\x7f", "a\xc2\x85",
                                "\xc2\x9b"
                                "31m"}) {
    CAPTURE(bad);
    const std::vector<std::pair<std::string, std::function<void(Message&)>>> fields = {
        {"exchange", [&](Message& m) { m.exchange = Exchange(bad); }},
        {"routing_key", [&](Message& m) { m.routing_key = RoutingKey(bad); }},
        {"type", [&](Message& m) { m.type = MessageType(bad); }},
        {"content_type", [&](Message& m) { m.content_type = bad; }},
        {"correlation_id", [&](Message& m) { m.correlation_id = bad; }}};
    for (const auto& [field, set] : fields) {
      auto m = valid_message();
      set(m);
      const auto what = testenv::error_of<ValidationError>([&] { validate_message(m, {}); },
                                                           [&](const ValidationError& e) {
                                                             CHECK(e.field() == field);
                                                           });
      CHECK_MESSAGE(testenv::contains(what, field + ": holds a control character (U+0000-U+001F, U+007F-U+009F): '"),
                    what);
      CHECK(what.find_first_of("\r\n\t\x1b\x7f") == std::string::npos);
    }
  }
  // Not sent, so not refused: the ordering key; and printable text of any script passes.
  auto m = valid_message();
  m.ordering_key = "order\t7";
  m.routing_key = RoutingKey(
      "commande.pass\xc3\xa9"
      "e.\xe2\x82\xac\xc2\xa0");  // é, €, NBSP (U+00A0)
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
  for (std::string bad :
       std::vector<std::string>{"", "has space", "semi;colon", "ünïcode", "x-outbox-id", std::string(129, 'h')}) {
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

TEST_CASE("the nil and the max UUID are refused as a message id naming message_id: they name no message") {
  // A producer stamping every message with one would have all but the first taken
  // for duplicates by a consumer's inbox.
  auto m = valid_message();
  for (std::string sentinel : {"00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"}) {
    m.message_id = sentinel;
    CHECK_THROWS_WITH_AS(validate_message(m, {}), doctest::Contains("message_id: is the"), ValidationError);
    CHECK_MESSAGE(rejected_field([&] { validate_message(m, {}); }) == "message_id", sentinel);
  }
  CHECK_THROWS_WITH(MessageId::parse_distinct("00000000-0000-0000-0000-000000000000"),
                    doctest::Contains("nil UUID '00000000-0000-0000-0000-000000000000', which names no message"));
  m.message_id = "00000000-0000-0000-0000-000000000001";
  CHECK_NOTHROW(validate_message(m, {}));
  CHECK(MessageId::parse("00000000-0000-0000-0000-000000000000").is_sentinel());  // parse() still reads it
}

TEST_CASE("a UUIDv7 has version 7, variant 10 and the current time") {
  auto before = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
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
    threads.emplace_back([&v] {
      for (int i = 0; i < 5000; ++i) v.push_back(MessageId::generate_v7());
    });
  for (auto& t : threads) t.join();
  std::set<MessageId> all;
  for (auto& v : per_thread) all.insert(v.begin(), v.end());
  CHECK(all.size() == 20000);
}

TEST_CASE("hostile schema names are refused before they reach SQL") {
  for (std::string bad : std::vector<std::string>{"", "Outbox", "a;drop table x", "a\"b", "sch ema", "schéma",
                                                  std::string(64, 'a'), "1abc"}) {
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
                          std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80")}) {  // surrogate, > U+10FFFF
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

namespace {

// n headers h00, h01, ... of `value_bytes` bytes each.
std::map<std::string, std::string> headers_of(int n, std::size_t value_bytes) {
  std::map<std::string, std::string> h;
  for (int i = 0; i < n; ++i) h[(i < 10 ? "h0" : "h") + std::to_string(i)] = std::string(value_bytes, 'v');
  return h;
}

std::string rejection(const Message& m, const MessageLimits& limits = {}) {
  return testenv::error_of<ValidationError>([&] { validate_message(m, limits); }, "(accepted)");
}

}  // namespace

TEST_CASE("a header table of 40 values of 4 KiB is refused: its AMQP header frame is above frame_max") {
  auto m = valid_message();
  m.headers = headers_of(40, 4096);  // each header alone is within the limits
  const auto error = rejection(m);
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "headers");
  CHECK_MESSAGE(error.find("AMQP header frame would be") != std::string::npos, error);
  CHECK_MESSAGE(error.find("above frame_max 131072") != std::string::npos, error);
  // What the relay would send: 40 entries of 6 + 3 + 4096 bytes and the rest of the frame.
  // Frame header and end (8), class, weight, body size, flags (14), delivery mode,
  // timestamp, table length, x-outbox-id, content type, message id, type.
  const auto frame = std::to_string(40 * (6 + 3 + 4096) + 8 + 14 + 1 + 8 + 4 + 21 + (1 + 16) + (1 + 36) + (1 + 11));
  CHECK_MESSAGE(error.find(frame + " bytes") != std::string::npos, error);
}

TEST_CASE("headers just within the outbox row's bound pass, one byte more is refused") {
  auto m = valid_message();
  // 31 entries of 6 + 3 + 4096 bytes, and one filling the rest up to kMaxHeadersBytes exactly.
  m.headers = headers_of(31, 4096);
  const std::size_t used = 31 * (6 + 3 + 4096);
  m.headers["last"] = std::string(kMaxHeadersBytes - used - (6 + 4), 'v');
  REQUIRE(header_entries_bytes({m.headers.begin(), m.headers.end()}) == kMaxHeadersBytes);
  CHECK_NOTHROW(validate_message(m, {}));  // the default frame_max has room for it
  m.headers["last"] += "v";
  const auto error = rejection(m);
  CHECK(rejected_field([&] { validate_message(m, {}); }) == "headers");
  CHECK_MESSAGE(error.find("130049 bytes of the AMQP header table, above the 130048") != std::string::npos, error);
  // Within the bound, the longest properties still fit the default frame.
  m.headers["last"].pop_back();
  m.type = MessageType(std::string(255, 't'));
  m.content_type = std::string(255, 'c');
  m.correlation_id = std::string(255, 'i');
  CHECK_NOTHROW(validate_message(m, {}));
  m.headers["last"] += "v";
  // A larger frame_max does not lift it: the table's CHECK holds the same bound.
  CHECK(rejected_field([&] { validate_message(m, MessageLimits{1024 * 1024, 1024 * 1024}); }) == "headers");
}

TEST_CASE("the trace context counts towards the header frame, as the relay sends it") {
  auto m = valid_message();
  m.traceparent = "00-4bf92f3577b34da6a50ef0ad5d85bd2b-00f067aa0ba902b7-01";
  m.tracestate = "vendor=" + std::string(250, 'x');
  MessageLimits limits;
  limits.frame_max = 4096;
  m.headers["big"] = std::string(3800, 'v');  // fits without the trace context, not with it
  CHECK(rejected_field([&] { validate_message(m, limits); }) == "headers");
  m.tracestate.reset();
  m.traceparent.reset();
  CHECK_NOTHROW(validate_message(m, limits));
}

TEST_CASE("a frame just within the smallest frame_max passes, a little more is refused") {
  auto m = valid_message();
  MessageLimits limits;
  limits.frame_max = 4096;
  m.headers["h"] = "";
  const std::string id(36, '0');
  std::vector<std::pair<std::string, std::string>> sent{{"h", ""}};
  WireProperties wire{&m.content_type, &id, &m.type.value(), nullptr, &sent};
  m.headers["h"] = std::string(4096 - content_header_frame_bytes(wire), 'v');
  REQUIRE(m.headers["h"].size() <= kHeaderValueMax);
  CHECK_NOTHROW(validate_message(m, limits));
  m.correlation_id = "c";  // two bytes more in the frame
  const auto error = rejection(m, limits);
  CHECK_MESSAGE(error.find("header frame would be 4098 bytes, above frame_max 4096") != std::string::npos, error);
}

TEST_CASE("a keyed message's frame counts the key and sequence headers the relay adds") {
  auto m = valid_message();
  MessageLimits limits;
  limits.frame_max = 4096;
  const std::string id(36, '0');
  std::vector<std::pair<std::string, std::string>> sent{{"h", ""}};
  WireProperties wire{&m.content_type, &id, &m.type.value(), nullptr, &sent};
  m.headers["h"] = std::string(4096 - content_header_frame_bytes(wire), 'v');
  CHECK_NOTHROW(validate_message(m, limits));
  // x-outbox-key (13 + 1 + 4 + 5 bytes) and x-outbox-seq (13 + 1 + 8).
  m.ordering_key = "k-123";
  const auto error = rejection(m, limits);
  CHECK_MESSAGE(error.find("header frame would be 4141 bytes, above frame_max 4096") != std::string::npos, error);
}

TEST_CASE("a frame_max below AMQP's minimum is refused naming it") {
  CHECK(rejected_field([&] { validate_message(valid_message(), MessageLimits{1024, 4095}); }) == "frame_max");
  CHECK_NOTHROW(validate_message(valid_message(), MessageLimits{1024, 4096}));
}

TEST_CASE("header names the relay or RabbitMQ reserves are refused naming the header") {
  for (std::string name :
       {"x-outbox-id", "x-outbox-anything", "CC", "BCC", "x-death", "x-first-death-queue", "x-first-death-reason",
        "x-last-death-exchange", "x-delivery-count", "x-received-from", "x-stream-filter-value", "x-stream-offset",
        "x-delay", "x-shovelled", "x-shovelled-timestamp", "x-mqtt-publish-qos", "x-amqp-1.0-properties"}) {
    auto m = valid_message();
    m.headers[name] = "v";
    const auto error = rejection(m);
    CHECK_MESSAGE(rejected_field([&] { validate_message(m, {}); }) == "headers['" + name + "']", name);
    CHECK_MESSAGE(error.find("is reserved") != std::string::npos, error);
  }
  // Case-sensitive as RabbitMQ reads them, and only whole names unless a prefix.
  for (std::string name : {"cc", "Bcc", "x-deathly", "x-delay-reason", "x-outbox", "tenant-CC"}) {
    auto m = valid_message();
    m.headers[name] = "v";
    CHECK_MESSAGE(rejection(m) == "(accepted)", name);
  }
}
