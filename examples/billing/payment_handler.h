#pragma once
// PaymentHandler: a payment state machine, Pending -> Captured -> Refunded.

#include <pqxx/transaction_base>
#include <string>

#include "outbox/delivery.h"
#include "outbox/natural_key_insert.h"
#include "outbox/state_transition.h"

namespace billing {

// Handles PaymentCaptured and PaymentRefunded ({"payment_id":N,"order_id":M}).
// A payment first seen is created Pending (natural key). Each event is a transition
// from the state it expects, so a repeated PaymentCaptured, or a late one arriving
// after the refund, changes nothing. A PaymentRefunded that overtakes its capture
// (payment still Pending) fails with a retryable error: the runner requeues it until
// the capture is in. Each applied transition adds one payment_history row.
//
// Thread-safe: stateless after construction.
class PaymentHandler {
 public:
  explicit PaymentHandler(const std::string& schema = "billing");

  void operator()(pqxx::transaction_base& tx, const outbox::Delivery& delivery) const;

 private:
  std::string schema_;  // quoted
  outbox::NaturalKeyInsert create_;
  outbox::StateTransition transition_;
};

// {"payment_id":N,"order_id":M}, for tests.
std::string payment_event_json(std::int64_t payment_id, std::int64_t order_id);

}  // namespace billing
