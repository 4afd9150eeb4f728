#include "order_placed.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "outbox/error_text.h"
#include "outbox/errors.h"

namespace billing {
namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& why) {
  throw outbox::PermanentError("OrderPlaced: '" + field + "' " + why + "; not invoiced, not charged");
}

// An integer field in [min, max]. A JSON number beyond int64 (parsed as unsigned or
// as a float) and a fraction are refused, never rounded or wrapped.
std::int64_t integer_field(const nlohmann::json& json, const std::string& name, std::int64_t min, std::int64_t max) {
  auto it = json.find(name);
  if (it == json.end()) refuse(name, "is missing");
  if (!it->is_number_integer()) refuse(name, "is not an integer");
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    refuse(name, "is " + it->dump() + ", above the maximum of " + std::to_string(max));
  const auto v = it->get<std::int64_t>();
  if (v < min) refuse(name, "is " + std::to_string(v) + ", below the minimum of " + std::to_string(min));
  if (v > max) refuse(name, "is " + std::to_string(v) + ", above the maximum of " + std::to_string(max));
  return v;
}

std::string currency_field(const nlohmann::json& json) {
  auto it = json.find("currency");
  if (it == json.end()) refuse("currency", "is missing");
  if (!it->is_string()) refuse("currency", "is not a string");
  const auto& c = it->get_ref<const std::string&>();
  for (const char* accepted : kAcceptedCurrencies)
    if (c == accepted) return c;
  refuse("currency", "is " + outbox::quoted_value(c, 16) + ", not one billing accepts (EUR, USD, GBP, CHF)");
}

// The customer id is pseudonymous but still the customer's: never echoed.
std::string customer_id_field(const nlohmann::json& json) {
  auto c = json.find("customer");
  if (c == json.end() || !c->is_object()) refuse("customer", "is missing or not an object");
  auto id = c->find("id");
  if (id == c->end() || !id->is_string()) refuse("customer.id", "is missing or not a string");
  const auto& v = id->get_ref<const std::string&>();
  if (v.empty() || v.size() > kMaxCustomerIdBytes)
    refuse("customer.id", "must be 1-" + std::to_string(kMaxCustomerIdBytes) + " bytes");
  return v;
}

}  // namespace

OrderPlaced parse_order_placed(const std::string& payload) {
  auto json = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    throw outbox::PermanentError("OrderPlaced: payload is not a JSON object");
  OrderPlaced o;
  o.order_id = integer_field(json, "order_id", 1, std::numeric_limits<std::int64_t>::max());
  o.total_cents = integer_field(json, "total_cents", 1, kMaxTotalCents);
  o.currency = currency_field(json);
  o.customer_id = customer_id_field(json);
  return o;
}

std::string order_placed_json(std::int64_t order_id, std::int64_t total_cents) {
  return nlohmann::json{{"order_id", order_id},
                        {"total_cents", total_cents},
                        {"currency", "EUR"},
                        {"customer", {{"id", "c-" + std::to_string(order_id % 17)}}}}
      .dump();
}

}  // namespace billing
