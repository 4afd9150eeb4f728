#include "invoice_handler.h"

#include <optional>

#include "order_placed.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace billing {

InvoiceHandler::InvoiceHandler(InvoiceHandlerOptions options, FakePaymentGateway& gateway)
    : options_(std::move(options)),
      gateway_(gateway),
      schema_(outbox::quoted_identifier(options_.schema, "schema")),
      insert_(options_.schema, "invoices", {"order_id", "customer_id", "amount_cents", "currency", "message_id"},
              {"order_id"}) {}

void InvoiceHandler::operator()(pqxx::transaction_base& tx, const outbox::Delivery& d) const {
  if (d.type != "OrderPlaced") return;
  OrderPlaced order = parse_order_placed(d.body);
  std::optional<std::string> key;
  if (options_.idempotency_key) key = "order-" + std::to_string(order.order_id);
  const std::string message_id = d.message_id.to_string();

  if (options_.strategy == InvoiceStrategy::kCheckThenAct) {
    auto existing = outbox::pgx::exec_params(tx, "SELECT 1 FROM " + schema_ + ".invoices WHERE order_id = $1",
                                             order.order_id);
    if (!existing.empty()) return;
    auto charge = gateway_.charge(key, order.total_cents);  // the window of the race
    outbox::pgx::exec_params(tx,
                             "INSERT INTO " + schema_ +
                                 ".invoices (order_id, customer_id, amount_cents, currency, charge_id, message_id) "
                                 "VALUES ($1, $2, $3, $4, $5, $6::uuid)",
                             order.order_id, order.customer_id, order.total_cents, order.currency, charge.id,
                             message_id);
    return;
  }

  if (insert_.insert(tx, order.order_id, order.customer_id, order.total_cents, order.currency, message_id) ==
      outbox::InsertOutcome::kAlreadyExists)
    return;  // this order is invoiced (and charged) already, whatever message carried it
  auto charge = gateway_.charge(key, order.total_cents);
  outbox::pgx::exec_params(tx, "UPDATE " + schema_ + ".invoices SET charge_id = $2 WHERE order_id = $1", order.order_id,
                           charge.id);
}

}  // namespace billing
