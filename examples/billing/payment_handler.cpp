#include "payment_handler.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace billing {
namespace {

std::int64_t integer_field(const nlohmann::json& json, const char* name, const std::string& type) {
  auto it = json.find(name);
  if (it == json.end() || !it->is_number_integer())
    throw outbox::PermanentError(type + ": '" + name + "' is missing or not an integer");
  return it->get<std::int64_t>();
}

}  // namespace

PaymentHandler::PaymentHandler(const std::string& schema)
    : schema_(outbox::quoted_identifier(schema, "schema")),
      create_(schema, "payments", {"payment_id", "order_id", "state"}, {"payment_id"}),
      transition_(schema, "payments", "payment_id", "state") {}

void PaymentHandler::operator()(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
  const bool captured = d.type == "PaymentCaptured";
  if (!captured && d.type != "PaymentRefunded") return;
  auto json = nlohmann::json::parse(d.body, nullptr, false);
  if (json.is_discarded() || !json.is_object()) throw outbox::PermanentError(d.type + ": payload is not a JSON object");
  const std::int64_t payment_id = integer_field(json, "payment_id", d.type);
  const std::int64_t order_id = integer_field(json, "order_id", d.type);

  create_.insert(tx, payment_id, order_id, std::string("pending"));  // no-op when known
  const std::string target = captured ? "captured" : "refunded";
  auto outcome = transition_.apply(tx, payment_id, {captured ? "pending" : "captured"}, target);
  if (outcome == outbox::TransitionOutcome::kApplied) {
    outbox::pgx::exec_params(tx,
                             "INSERT INTO " + schema_ +
                                 ".payment_history (payment_id, state, message_id) VALUES ($1, $2, $3::uuid)",
                             payment_id, target, d.message_id.to_string());
    return;
  }
  if (!captured) {
    auto state = outbox::pgx::exec_params1(tx, "SELECT state FROM " + schema_ + ".payments WHERE payment_id = $1",
                                           payment_id)[0]
                     .as<std::string>();
    if (state == "pending")  // the refund overtook its capture: try again later
      throw std::runtime_error("PaymentRefunded for payment " + std::to_string(payment_id) +
                               " arrived before its capture; retrying");
  }
  // Otherwise a duplicate or a stale event: the state already moved past it.
}

std::string payment_event_json(std::int64_t payment_id, std::int64_t order_id) {
  return nlohmann::json{{"payment_id", payment_id}, {"order_id", order_id}}.dump();
}

}  // namespace billing
