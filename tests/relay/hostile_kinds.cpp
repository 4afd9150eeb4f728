#include "hostile_kinds.h"

#include <stdexcept>

namespace hostile {
namespace {

// 40 headers of 4 KiB: a header table of ~160 KiB, over the 128 KiB AMQP frame the
// relay negotiates. rabbitmq-c encodes the whole content header into one frame.
std::string headers_over_frame() {
  std::string json = "{";
  for (int i = 0; i < 40; ++i) json += (i ? ",\"h" : "\"h") + std::to_string(i) + "\":\"" + std::string(4096, 'v') + "\"";
  return json + "}";
}

}  // namespace

std::vector<HostileKind> all_kinds(const Targets& t) {
  using F = Failure;
  HostileRow base;
  base.exchange = t.exchange;
  base.routing_key = t.routing_key;
  auto with = [&](auto change) {
    HostileRow r = base;
    change(r);
    return r;
  };
  auto headers = [&](const std::string& json) { return with([&](HostileRow& r) { r.headers = json; }); };
  const std::string long_text(300, 'l');  // a shortstr over 255 bytes
  return {
      {"headers number value", {"headers"}, F::kBeforeSending, headers(R"({"a":1})")},
      {"headers array", {"headers"}, F::kBeforeSending, headers("[1,2]")},
      {"headers string", {"headers"}, F::kBeforeSending, headers(R"("x")")},
      {"headers nested object", {"headers"}, F::kBeforeSending, headers(R"({"a":{"b":"c"}})")},
      {"headers json null", {"headers"}, F::kBeforeSending, headers("null")},
      {"headers boolean value", {"headers"}, F::kBeforeSending, headers(R"({"a":true})")},
      {"header table over frame size", {"frame"}, F::kBeforeSending, headers(headers_over_frame())},
      {"header name over 255 bytes", {"255"}, F::kBeforeSending, headers("{\"" + long_text + "\":\"v\"}")},
      {"reserved header x-outbox-id", {"x-outbox-id"}, F::kBeforeSending, headers(R"({"x-outbox-id":"7"})")},
      {"reserved header CC", {"CC"}, F::kBeforeSending, headers(R"({"CC":"elsewhere"})")},
      {"routing key over 255 bytes", {"255"}, F::kBeforeSending, with([&](HostileRow& r) { r.routing_key = long_text; })},
      {"correlation id over 255 bytes", {"255"}, F::kBeforeSending, with([&](HostileRow& r) { r.correlation_id = long_text; })},
      {"message type over 255 bytes", {"255"}, F::kBeforeSending, with([&](HostileRow& r) { r.type = long_text; })},
      {"content type over 255 bytes", {"255"}, F::kBeforeSending, with([&](HostileRow& r) { r.content_type = long_text; })},
      {"created_at infinity", {"created_at"}, F::kBeforeSending, with([&](HostileRow& r) { r.created_at = "infinity"; })},
      {"message over broker max size", {"406"}, F::kChannelClosed, with([&](HostileRow& r) { r.payload_bytes = 100000; })},
      {"missing exchange", {"404"}, F::kChannelClosed, with([&](HostileRow& r) { r.exchange = t.missing_exchange; })},
      {"internal exchange", {"403"}, F::kChannelClosed, with([&](HostileRow& r) { r.exchange = t.internal_exchange; })},
      {"unroutable routing key", {"NO_ROUTE", "returned"}, F::kReturned,
       with([&](HostileRow& r) { r.routing_key = "nobody.is.bound.here"; })},
  };
}

HostileKind kind_named(const Targets& t, const std::string& name) {
  for (auto& k : all_kinds(t))
    if (k.name == name) return k;
  throw std::out_of_range("no hostile kind named " + name);
}

}  // namespace hostile
