#pragma once
// The billing service's tables: invoices, payments and the payment history, next to
// the inbox (and outbox) of the same schema.

#include <string>

#include "outbox/pqxx_compat.h"

namespace billing {

// Migrates `schema` with the SDK's migrations (inbox, outbox) and creates the billing
// tables if missing. `unique_order_key` = false leaves invoices without the unique
// order key, which only the naive-handler demonstration wants.
// REQUIRES: no transaction open on `conn`. Throws ValidationError for a bad name.
void create_billing_schema(outbox::PgConnection& conn, const std::string& schema, bool unique_order_key = true);

}  // namespace billing
