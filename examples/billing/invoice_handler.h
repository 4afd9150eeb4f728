#pragma once
// InvoiceHandler: turns an OrderPlaced into one invoice and one charge.

#include <pqxx/transaction_base>
#include <string>

#include "fake_payment_gateway.h"
#include "outbox/delivery.h"
#include "outbox/natural_key_insert.h"

namespace billing {

enum class InvoiceStrategy {
  // SELECT the invoice, charge, INSERT: two concurrent deliveries both see "no
  // invoice" and both charge. Kept to show the race; never use it.
  kCheckThenAct,
  // INSERT ... ON CONFLICT (order_id) DO NOTHING first; charge only when the row is
  // new. Holds the new row (and its key) until commit, so a concurrent copy waits.
  kNaturalKey,
};

struct InvoiceHandlerOptions {
  std::string schema = "billing";  // where the invoices table lives
  InvoiceStrategy strategy = InvoiceStrategy::kNaturalKey;
  // Send "order-<id>" to the gateway as the idempotency key, so a charge retried
  // after a failed commit replays instead of taking the money again.
  bool idempotency_key = true;
};

// A ConsumerRunner handler (callable with the transaction and the delivery).
// Payloads that are not a chargeable OrderPlaced (parse_order_placed: a positive
// amount within kMaxTotalCents, an accepted currency, a customer) throw
// outbox::PermanentError before any write or charge, so the runner dead-letters them
// with the reason in its log; messages of other types are acknowledged and ignored.
// Thread-safe: stateless apart from the gateway, which is thread-safe.
class InvoiceHandler {
 public:
  InvoiceHandler(InvoiceHandlerOptions options, FakePaymentGateway& gateway);

  void operator()(pqxx::transaction_base& tx, const outbox::Delivery& delivery) const;

 private:
  InvoiceHandlerOptions options_;
  FakePaymentGateway& gateway_;
  std::string schema_;  // quoted
  outbox::NaturalKeyInsert insert_;
};

}  // namespace billing
