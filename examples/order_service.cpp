// order-service: an example service that writes orders and their OrderPlaced events
// in one transaction each, through the producer SDK.
//
//   order-service --orders N [--rollback-every K]
//
// Reads OUTBOX_PG_DSN. Orders go to shop.orders, events to the outbox in schema
// "outbox" (exchange "orders", routing key "order.placed"). Every K-th order is
// rolled back on purpose: neither the order nor its event may ever appear.

#include <iostream>
#include <pqxx/pqxx>
#include <string>

#include "outbox/migrator.h"
#include "outbox/outbox_writer.h"

namespace {

int parse_int(const std::string& flag, const char* value) {
  try {
    std::size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == std::string(value).size() && n >= 0) return n;
  } catch (...) {
  }
  throw std::invalid_argument(flag + ": expected a non-negative integer, got '" + value + "'");
}

}  // namespace

int main(int argc, char** argv) {
  int orders = 100, rollback_every = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--orders" && i + 1 < argc) orders = parse_int(a, argv[++i]);
      else if (a == "--rollback-every" && i + 1 < argc) rollback_every = parse_int(a, argv[++i]);
      else throw std::invalid_argument("unknown argument '" + a + "'");
    }
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what() << "\nusage: order-service --orders N [--rollback-every K]\n";
    return 2;
  }
  const char* dsn = std::getenv("OUTBOX_PG_DSN");
  if (!dsn) {
    std::cerr << "order-service: OUTBOX_PG_DSN is not set\n";
    return 2;
  }
  try {
    pqxx::connection conn(dsn);
    outbox::Migrator("outbox").migrate(conn);
    {
      pqxx::work tx(conn);
      tx.exec("CREATE SCHEMA IF NOT EXISTS shop");
      tx.exec("CREATE TABLE IF NOT EXISTS shop.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
              "customer text NOT NULL, total_cents bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())");
      tx.commit();
    }
    outbox::OutboxWriter writer({"outbox", {}});
    int committed = 0, rolled_back = 0;
    for (int n = 1; n <= orders; ++n) {
      pqxx::work tx(conn);
      std::string customer = "customer-" + std::to_string(n % 17);
      long long total = 1000 + (n * 137) % 9000;
      auto order_id = tx.exec_params1("INSERT INTO shop.orders (customer, total_cents) VALUES ($1, $2) RETURNING id",
                                      customer, total)[0].as<long long>();
      outbox::Message event;
      event.exchange = outbox::Exchange("orders");
      event.routing_key = outbox::RoutingKey("order.placed");
      event.type = outbox::MessageType("OrderPlaced");
      event.ordering_key = std::to_string(order_id);
      event.payload = "{\"order_id\":" + std::to_string(order_id) + ",\"customer\":\"" + customer +
                      "\",\"total_cents\":" + std::to_string(total) + "}";
      writer.enqueue(tx, event);
      if (rollback_every > 0 && n % rollback_every == 0) {
        tx.abort();
        ++rolled_back;
      } else {
        tx.commit();
        ++committed;
      }
    }
    std::cout << "order-service: " << committed << " orders written with their OrderPlaced events, "
              << rolled_back << " rolled back on purpose\n";
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
