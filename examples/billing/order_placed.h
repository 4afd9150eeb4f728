#pragma once
// OrderPlaced: the fields of the event the billing service needs, checked as
// business input before any money moves.

#include <array>
#include <cstdint>
#include <string>

namespace billing {

struct OrderPlaced {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
  std::string currency = "EUR";
  std::string customer_id;  // pseudonymous, never encrypted (the PII fields are not read here)
};

// What the billing service accepts. A charge is for a real order: a positive amount
// in minor units (cents), at most kMaxTotalCents (1,000,000.00 in the currency's
// major unit: above that a payment provider wants a manual review, not an automatic
// charge), in one of the currencies billing is set up for.
constexpr std::int64_t kMaxTotalCents = 100'000'000;
constexpr std::array<const char*, 4> kAcceptedCurrencies = {"EUR", "USD", "GBP", "CHF"};
constexpr std::size_t kMaxCustomerIdBytes = 200;

// Parses and checks the JSON payload. A payload that is not a chargeable OrderPlaced
// throws outbox::PermanentError naming the field and the reason: bad JSON; order_id
// missing, not an integer or not positive; total_cents missing, not an integer
// (a fraction, a string, a number beyond 64 bits), zero or negative, or above
// kMaxTotalCents; currency missing or not one of kAcceptedCurrencies; customer.id
// missing, empty or longer than kMaxCustomerIdBytes. Retrying cannot fix any of
// them, so the runner dead-letters the event at once, before an invoice or a charge.
// Pure; thread-safe.
OrderPlaced parse_order_placed(const std::string& payload);

// "{"order_id":N,"total_cents":M,"currency":"EUR","customer":{"id":"c-1"}}", for tests.
std::string order_placed_json(std::int64_t order_id, std::int64_t total_cents);

}  // namespace billing
