#include "order_placed.h"

#include <nlohmann/json.hpp>

#include "outbox/errors.h"

namespace billing {

OrderPlaced parse_order_placed(const std::string& payload) {
  auto json = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) throw outbox::PermanentError("OrderPlaced: payload is not a JSON object");
  OrderPlaced o;
  auto field = [&](const char* name) -> const nlohmann::json& {
    auto it = json.find(name);
    if (it == json.end() || !it->is_number_integer())
      throw outbox::PermanentError(std::string("OrderPlaced: '") + name + "' is missing or not an integer");
    return *it;
  };
  o.order_id = field("order_id").get<std::int64_t>();
  o.total_cents = field("total_cents").get<std::int64_t>();
  if (auto it = json.find("currency"); it != json.end() && it->is_string()) o.currency = it->get<std::string>();
  if (auto c = json.find("customer"); c != json.end() && c->is_object())
    if (auto id = c->find("id"); id != c->end() && id->is_string()) o.customer_id = id->get<std::string>();
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
