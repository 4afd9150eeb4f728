#include "billing_schema.h"

#include <pqxx/pqxx>

#include "outbox/migrator.h"
#include "outbox/sql_identifier.h"

namespace billing {

void create_billing_schema(outbox::PgConnection& conn, const std::string& schema, bool unique_order_key) {
  const std::string s = outbox::quoted_identifier(schema, "schema");
  outbox::Migrator(schema).migrate(conn);
  pqxx::work tx(conn, "billing_schema");
  tx.exec("CREATE TABLE IF NOT EXISTS " + s +
          ".invoices ("
          "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
          "order_id bigint NOT NULL, customer_id text NOT NULL DEFAULT '', amount_cents bigint NOT NULL, "
          "currency text NOT NULL, charge_id text, message_id uuid NOT NULL, "
          "created_at timestamptz NOT NULL DEFAULT now())");
  if (unique_order_key)
    tx.exec("CREATE UNIQUE INDEX IF NOT EXISTS invoices_order_id_key ON " + s + ".invoices (order_id)");
  tx.exec("CREATE TABLE IF NOT EXISTS " + s +
          ".payments ("
          "payment_id bigint PRIMARY KEY, order_id bigint NOT NULL, "
          "state text NOT NULL CHECK (state IN ('pending', 'captured', 'refunded')), "
          "updated_at timestamptz NOT NULL DEFAULT now())");
  tx.exec("CREATE TABLE IF NOT EXISTS " + s +
          ".payment_history ("
          "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payment_id bigint NOT NULL, "
          "state text NOT NULL, message_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT now())");
  tx.commit();
}

}  // namespace billing
