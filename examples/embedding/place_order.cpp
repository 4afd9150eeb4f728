// place-order: writes one order and its OrderPlaced event in ONE transaction with the
// producer SDK; the relay publishes the event once the transaction has committed.
//
//   place-order ORDER_ID TOTAL_CENTS [--rollback]
//
// Environment: OUTBOX_PG_DSN (libpq connection string, required), OUTBOX_SCHEMA (the
// outbox's schema, migrated by `outbox-relay migrate`; default "outbox"), SHOP_SCHEMA
// (where the orders table lives; default "shop"), SHOP_EXCHANGE (default "shop").
// --rollback writes both rows, then rolls back: neither the order nor its event exists.
// Prints the event's message id (UUIDv7) on success.

#include <cstdlib>
#include <iostream>
#include <pqxx/pqxx>
#include <string>

#include "outbox/errors.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string(argv[3]) != "--rollback")) {
    std::cerr << "usage: place-order ORDER_ID TOTAL_CENTS [--rollback]\n";
    return 2;
  }
  const std::string dsn = env_or("OUTBOX_PG_DSN", "");
  if (dsn.empty()) {
    std::cerr << "place-order: OUTBOX_PG_DSN is not set\n";
    return 2;
  }
  try {
    const long long order_id = std::stoll(argv[1]);
    const long long total_cents = std::stoll(argv[2]);
    const bool rollback = argc == 4;

    pqxx::connection conn(dsn);
    // One writer per process: stateless, shareable by threads (one transaction each).
    outbox::OutboxWriter writer({.schema = env_or("OUTBOX_SCHEMA", "outbox")});
    const std::string shop = conn.quote_name(env_or("SHOP_SCHEMA", "shop"));
    const std::string orders = shop + ".orders";

    pqxx::work tx(conn);
    outbox::pgx::exec0(tx, "CREATE SCHEMA IF NOT EXISTS " + shop);  // a real service has its own migrations
    outbox::pgx::exec0(tx, "CREATE TABLE IF NOT EXISTS " + orders +
                               " (id bigint PRIMARY KEY, total_cents bigint NOT NULL)");
    outbox::pgx::exec_params0(tx, "INSERT INTO " + orders + " (id, total_cents) VALUES ($1, $2)", order_id,
                              total_cents);

    outbox::Message event;
    event.exchange = outbox::Exchange(env_or("SHOP_EXCHANGE", "shop"));
    event.routing_key = outbox::RoutingKey("order.placed");
    event.type = outbox::MessageType("OrderPlaced");
    event.ordering_key = std::to_string(order_id);  // events of one order stay in order
    event.payload = R"({"order_id":)" + std::to_string(order_id) + R"(,"total_cents":)" + std::to_string(total_cents) +
                    "}";
    outbox::MessageId id = writer.enqueue(tx, event);  // validated, then one INSERT in tx

    if (rollback) {
      tx.abort();  // the order and its event vanish together
      std::cout << "rolled back " << id.to_string() << "\n";
    } else {
      tx.commit();  // the order and its event commit together
      std::cout << id.to_string() << "\n";
    }
    return 0;
  } catch (const outbox::ValidationError& e) {  // a bad message: nothing was written
    std::cerr << "place-order: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "place-order: " << e.what() << "\n";
    return 1;
  }
}
