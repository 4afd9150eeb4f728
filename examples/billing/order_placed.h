#pragma once
// OrderPlaced: the fields of the event the billing service needs.

#include <cstdint>
#include <string>

namespace billing {

struct OrderPlaced {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
  std::string currency = "EUR";
  std::string customer_id;  // pseudonymous, never encrypted (the PII fields are not read here)
};

// Parses the JSON payload. A payload that is not an OrderPlaced (bad JSON, missing
// or mistyped order_id / total_cents) throws outbox::PermanentError: retrying cannot
// fix it, so the runner dead-letters it at once. Pure; thread-safe.
OrderPlaced parse_order_placed(const std::string& payload);

// "{"order_id":N,"total_cents":M,"currency":"EUR","customer":{"id":"c-1"}}", for tests.
std::string order_placed_json(std::int64_t order_id, std::int64_t total_cents);

}  // namespace billing
