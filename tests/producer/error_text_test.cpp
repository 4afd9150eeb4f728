// SDK error messages quote caller values escaped and bounded: a caller that logs
// what() cannot have a log line split or forged by a value with CR/LF, control
// bytes or non-printables, nor flooded by a huge one.
#include "outbox/error_text.h"

#include <doctest/doctest.h>

#include "outbox/crypto_errors.h"
#include "outbox/event_schema.h"
#include "outbox/message.h"
#include "outbox/message_id.h"
#include "outbox/one_line.h"
#include "outbox/sql_identifier.h"
#include "outbox/trace_context.h"
#include "test_text.h"

using namespace outbox;

namespace {

// The forged line an attacker would like to see in the caller's log.
const std::string kInjected = "x\r\n2026-01-01 INFO payment approved\x1b[2J\x7f";

bool has_control_byte(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

// what() of the ValidationError `fn` throws; fails the test when it throws none.
template <class Fn>
std::string validation_error(Fn fn) {
  return testenv::error_of<ValidationError>(fn, [](const ValidationError& e) {
    CHECK(!has_control_byte(e.field()));
    CHECK(!has_control_byte(e.detail()));
  });
}

Message message_with(void (*change)(Message&)) {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = "{}";
  change(m);
  return m;
}

}  // namespace

TEST_CASE("quoted_value escapes control bytes, quotes, backslashes and non-ASCII, and bounds the length") {
  CHECK(quoted_value("plain-name_1.2") == "'plain-name_1.2'");
  CHECK(quoted_value("a\r\nb\tc") == "'a\\r\\nb\\tc'");
  CHECK(quoted_value(std::string("\x00\x1b\x7f", 3)) == "'\\x00\\x1b\\x7f'");
  CHECK(quoted_value("it's a \\ path") == "'it\\'s a \\\\ path'");
  // U+2028 (line separator) and U+202E (right-to-left override) are not printed raw.
  CHECK(quoted_value("a\xe2\x80\xa8"
                     "b\xe2\x80\xae") == "'a\\xe2\\x80\\xa8b\\xe2\\x80\\xae'");
  CHECK(quoted_value(std::string(1000, 'a'), 64) == "'" + std::string(64, 'a') + "'... (1000 bytes)");
  CHECK(quoted_value(std::string(64, 'a'), 64) == "'" + std::string(64, 'a') + "'");
}

TEST_CASE("one_line escapes control bytes only") {
  CHECK(one_line("a\r\nb") == "a\\r\\nb");
  CHECK(one_line("keep 'quotes' \\ and \xc3\xa9") == "keep 'quotes' \\ and \xc3\xa9");
}

TEST_CASE("one_line's result is valid UTF-8: a character is never cut and malformed bytes are escaped") {
  // RabbitMQ cuts its reply text at 255 bytes, inside a character: PostgreSQL refused
  // such a last_error (SQLSTATE 22021) and the whole batch's mark rolled back.
  std::string name;
  for (int i = 0; i < 127; ++i) name += "\xc3\xbc";  // 127 x u-umlaut
  const std::string reply = ("NOT_FOUND - no exchange '" + name + "' in vhost '/'").substr(0, 252);
  const auto line = one_line(reply);
  CHECK(line == reply.substr(0, 251) + "\\xc3");  // the last byte, half a character, escaped
  CHECK(one_line(name, 64).size() == 64 + 3);     // 32 whole characters, then "..."
  CHECK(one_line(name, 65).size() == 64 + 3);     // not 32 and a half
  CHECK(one_line("\xff\xfe ok \xe2\x82") == "\\xff\\xfe ok \\xe2\\x82");
  CHECK(one_line("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80") ==  // overlong, surrogate, past U+10FFFF
        "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80");
  CHECK(one_line("\xe2\x82\xac \xf0\x9f\x92\xb3") == "\xe2\x82\xac \xf0\x9f\x92\xb3");  // euro sign, card
}

TEST_CASE("one_line escapes the C1 controls and direction marks a hand-written row could steer a terminal with") {
  // U+009B is CSI and U+009D OSC for a terminal in UTF-8 mode: "\u009b2J" clears the
  // screen of an operator reading `dead list`, "\u009d52;c;...\u009c" writes the clipboard.
  CHECK(one_line("a\xc2\x9b"
                 "2J b") == "a\\xc2\\x9b2J b");
  CHECK(one_line("\xc2\x9d"
                 "52;c;cm0gLXJmIC8K\xc2\x9c") == "\\xc2\\x9d52;c;cm0gLXJmIC8K\\xc2\\x9c");
  CHECK(one_line("\xc2\x80\xc2\x85") == "\\xc2\\x80\\xc2\\x85");
  // A right-to-left override, an isolate, a line separator, the Arabic letter mark.
  CHECK(one_line("pay \xe2\x80\xae"
                 "001$") == "pay \\xe2\\x80\\xae001$");
  CHECK(one_line("\xe2\x81\xa6x\xe2\x81\xa9") == "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");
  CHECK(one_line("a\xe2\x80\xa8"
                 "b") == "a\\xe2\\x80\\xa8b");
  CHECK(one_line("\xd8\x9c") == "\\xd8\\x9c");
  // Printable neighbours stay as they are: no-break space, e-acute, en dash, euro sign.
  CHECK(one_line("\xc2\xa0\xc3\xa9\xe2\x80\x93\xe2\x82\xac") == "\xc2\xa0\xc3\xa9\xe2\x80\x93\xe2\x82\xac");
  // The cap counts the escapes: never more than max_bytes plus "...".
  CHECK(one_line("ab\xc2\x9b", 5) == "ab...");
}

TEST_CASE("a header name with CR/LF is escaped in the validation error, never echoed raw") {
  Message m = message_with([](Message& x) { x.headers[kInjected] = "v"; });
  auto what = validation_error([&] { validate_message(m, MessageLimits{}); });
  CHECK(!has_control_byte(what));
  CHECK(what.find("x\\r\\n2026-01-01 INFO payment approved\\x1b[2J\\x7f") != std::string::npos);
  CHECK(what.find("header name may only use") != std::string::npos);
}

TEST_CASE("a huge header name is shown bounded with its size") {
  Message m = message_with([](Message&) {});
  m.headers[std::string(100000, '\n')] = "v";
  auto what = validation_error([&] { validate_message(m, MessageLimits{}); });
  CHECK(!has_control_byte(what));
  CHECK(what.size() < 600);
  CHECK(what.find("(100000 bytes)") != std::string::npos);
}

TEST_CASE("every SDK error that quotes a caller value keeps it on one line") {
  SUBCASE("a too long exchange") {
    Message m = message_with([](Message& x) { x.exchange = Exchange(std::string(300, '\n') + kInjected); });
    CHECK(!has_control_byte(validation_error([&] { validate_message(m, MessageLimits{}); })));
  }
  SUBCASE("a message id") {
    auto what = validation_error([] { MessageId::parse(kInjected, "message_id"); });
    CHECK(!has_control_byte(what));
    CHECK(what.find("not a UUID") != std::string::npos);
  }
  SUBCASE("a traceparent") {
    CHECK(!has_control_byte(validation_error([] { validate_traceparent("00-" + kInjected); })));
  }
  SUBCASE("a tracestate member") {
    CHECK(!has_control_byte(validation_error([] { validate_tracestate("a=1," + kInjected); })));
  }
  SUBCASE("a schema name (SQL identifier)") {
    auto what = validation_error([] { quoted_identifier(kInjected, "schema"); });
    CHECK(!has_control_byte(what));
    CHECK(what.find("not a plain identifier") != std::string::npos);
  }
  SUBCASE("an event schema property name") {
    CHECK(!has_control_byte(validation_error([] {
      EventSchema::parse("type: object\nproperties:\n  \"a\\r\\nINFO forged\": {type: string}\n", "bad.yaml");
    })));
  }
  SUBCASE("an event schema type") {
    CHECK(!has_control_byte(validation_error([] {
      EventSchema::parse("type: object\nproperties:\n  a: {type: \"str\\ning\"}\n", "bad.yaml");
    })));
  }
}

TEST_CASE("the SDK's error types keep a message on one line even where a call site forgot to quote") {
  ValidationError v("headers[" + kInjected + "]", "bad " + kInjected);
  CHECK(!has_control_byte(v.what()));
  CHECK(!has_control_byte(v.field()));
  DecryptionError d("$." + kInjected, "unknown key id " + kInjected);
  CHECK(!has_control_byte(d.what()));
  CHECK(!has_control_byte(d.path()));
}
