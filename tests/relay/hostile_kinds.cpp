#include "hostile_kinds.h"

#include <pqxx/pqxx>
#include <stdexcept>

#include "outbox/pqxx_compat.h"

namespace hostile {
namespace {

// 40 headers of 4 KiB: a header table of ~160 KiB, over the 128 KiB AMQP frame the
// relay negotiates. rabbitmq-c encodes the whole content header into one frame.
std::string headers_over_frame() {
  std::string json = "{";
  for (int i = 0; i < 40; ++i)
    json += (i ? ",\"h" : "\"h") + std::to_string(i) + "\":\"" + std::string(4096, 'v') + "\"";
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
      {"headers number value", {"headers"}, F::kBeforeSending, headers(R"({"a":1})"), "outbox_headers_object"},
      {"headers array", {"headers"}, F::kBeforeSending, headers("[1,2]"), "outbox_headers_object"},
      {"headers string", {"headers"}, F::kBeforeSending, headers(R"("x")"), "outbox_headers_object"},
      {"headers nested object", {"headers"}, F::kBeforeSending, headers(R"({"a":{"b":"c"}})"), "outbox_headers_object"},
      {"headers json null", {"headers"}, F::kBeforeSending, headers("null"), "outbox_headers_object"},
      {"headers boolean value", {"headers"}, F::kBeforeSending, headers(R"({"a":true})"), "outbox_headers_object"},
      {"header table over frame size",
       {"frame"},
       F::kBeforeSending,
       headers(headers_over_frame()),
       "outbox_headers_size"},
      {"header name over 255 bytes",
       {"255"},
       F::kBeforeSending,
       headers("{\"" + long_text + "\":\"v\"}"),
       "outbox_header_names"},
      {"reserved header x-outbox-id",
       {"x-outbox-id"},
       F::kBeforeSending,
       headers(R"({"x-outbox-id":"7"})"),
       "outbox_header_names_reserved"},
      {"reserved header CC",
       {"CC"},
       F::kBeforeSending,
       headers(R"({"CC":"elsewhere"})"),
       "outbox_header_names_reserved"},
      {"routing key over 255 bytes",
       {"255"},
       F::kBeforeSending,
       with([&](HostileRow& r) { r.routing_key = long_text; }),
       "outbox_shortstr_lengths"},
      {"correlation id over 255 bytes",
       {"255"},
       F::kBeforeSending,
       with([&](HostileRow& r) { r.correlation_id = long_text; }),
       "outbox_shortstr_lengths"},
      {"message type over 255 bytes",
       {"255"},
       F::kBeforeSending,
       with([&](HostileRow& r) { r.type = long_text; }),
       "outbox_shortstr_lengths"},
      {"content type over 255 bytes",
       {"255"},
       F::kBeforeSending,
       with([&](HostileRow& r) { r.content_type = long_text; }),
       "outbox_shortstr_lengths"},
      {"created_at infinity", {"created_at"}, F::kBeforeSending, with([&](HostileRow& r) {
         r.created_at = "infinity";
       })},
      // The oldest pending row: the relay's backlog statistics (age of the oldest) meet it.
      {"created_at -infinity", {"created_at"}, F::kBeforeSending, with([&](HostileRow& r) {
         r.created_at = "-infinity";
       })},
      {"message over broker max size", {"406"}, F::kChannelClosed, with([&](HostileRow& r) {
         r.payload_bytes = 100000;
       })},
      {"missing exchange", {"404"}, F::kChannelClosed, with([&](HostileRow& r) { r.exchange = t.missing_exchange; })},
      {"internal exchange", {"403"}, F::kChannelClosed, with([&](HostileRow& r) { r.exchange = t.internal_exchange; })},
      {"unroutable routing key", {"NO_ROUTE", "returned"}, F::kReturned, with([&](HostileRow& r) {
         r.routing_key = "nobody.is.bound.here";
       })},
  };
}

HostileKind kind_named(const Targets& t, const std::string& name) {
  for (auto& k : all_kinds(t))
    if (k.name == name) return k;
  throw std::out_of_range("no hostile kind named " + name);
}

std::pair<long long, std::string> insert_row(pqxx::transaction_base& tx, const std::string& schema, const HostileRow& r,
                                             const std::string& key, bool legacy) {
  auto row = outbox::pgx::exec_params1(
      tx,
      "INSERT INTO \"" + schema +
          "\".outbox (message_id, exchange, routing_key, message_type, ordering_key, "
          "content_type, headers, correlation_id, payload, created_at, last_error) VALUES (gen_random_uuid(), $1, $2, "
          "$3, $4, $5, $6::jsonb, NULLIF($7, ''), convert_to(repeat('p', $8::int), 'UTF8'), "
          "COALESCE(NULLIF($9, '')::timestamptz, now()), NULLIF($10, '')) RETURNING id, message_id::text",
      r.exchange, r.routing_key, r.type, key, r.content_type, r.headers, r.correlation_id,
      static_cast<int>(r.payload_bytes), r.created_at, std::string(legacy ? "legacy row" : ""));
  return {row[0].as<long long>(), row[1].c_str()};
}

}  // namespace hostile
