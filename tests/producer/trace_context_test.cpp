// W3C trace context on outbox::Message: what validate_message accepts and refuses.
#include "outbox/trace_context.h"

#include <doctest/doctest.h>

#include <vector>

#include "outbox/errors.h"
#include "outbox/message.h"

using namespace outbox;

namespace {

const std::string kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

Message valid() {
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.payload = "{}";
  return m;
}

std::string field_of(const Message& m) {
  try {
    validate_message(m, {});
  } catch (const ValidationError& e) {
    return e.field();
  }
  return "";
}

}  // namespace

TEST_CASE("a traceparent in the W3C format is accepted, with or without tracestate") {
  auto m = valid();
  m.traceparent = kParent;
  CHECK(field_of(m) == "");
  m.tracestate = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE, vendor@tenant=x y";
  CHECK(field_of(m) == "");
  // A future version may append fields after a dash.
  CHECK_NOTHROW(validate_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
  CHECK_NOTHROW(validate_tracestate(""));
  CHECK_NOTHROW(validate_tracestate("a=1,,b=2"));
}

TEST_CASE("malformed traceparents are refused naming the field") {
  for (const std::string bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // v00 is exactly 55
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    // separators
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    // not hex
       }) {
    auto m = valid();
    m.traceparent = bad;
    CHECK_MESSAGE(field_of(m) == "traceparent", bad);
  }
}

TEST_CASE("malformed tracestates, a tracestate alone, and trace headers set by hand are refused") {
  const std::vector<std::string> bads = {
      "novalue", "UPPER=1", "a=1,a=2", "a=b=c", "a=", "1abc=x", std::string(513, 'a'), "a=\x01"};
  for (const auto& bad : bads) {
    auto m = valid();
    m.traceparent = kParent;
    m.tracestate = bad;
    CHECK_MESSAGE(field_of(m) == "tracestate", bad);
  }
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  CHECK_THROWS_AS(validate_tracestate(many), ValidationError);

  auto alone = valid();
  alone.tracestate = "a=1";
  CHECK(field_of(alone) == "tracestate");
  auto by_hand = valid();
  by_hand.headers["traceparent"] = kParent;
  CHECK(field_of(by_hand) == "headers['traceparent']");
}

TEST_CASE("a later-version traceparent longer than a header value's 4096 bytes is refused naming its length") {
  // The writer stores the traceparent as a header value, which the table's CHECK
  // outbox_header_values limits to 4096 bytes: refused here, not at the INSERT (23514).
  const std::string later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-";
  auto m = valid();
  m.traceparent = later + std::string(4096 - later.size(), 'x');
  CHECK(field_of(m) == "");

  m.traceparent = later + std::string(5000 - later.size(), 'x');
  try {
    validate_message(m, {});
    FAIL("a 5000-byte traceparent was accepted");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "traceparent");
    CHECK(e.detail() == "is 5000 bytes, the limit is 4096 (a header value's)");
  }
  m.traceparent = later + std::string(4097 - later.size(), 'x');
  CHECK(field_of(m) == "traceparent");
}

TEST_CASE("a later-version traceparent with a NUL or bytes that are not UTF-8 is refused naming it") {
  // The fields after the flags are free-form, but the row's headers are JSON text,
  // which holds neither: the INSERT or the JSON encoder would fail instead.
  const std::string later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-";
  for (const std::string& bad : {later + std::string("a\0b", 3), later + "\xff", later + "ok\xc3"}) {
    auto m = valid();
    m.traceparent = bad;
    CHECK(field_of(m) == "traceparent");
  }
}
