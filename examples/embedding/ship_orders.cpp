// ship-orders: consumes OrderPlaced and records one shipment per order, however often
// the event arrives: the consumer SDK writes the inbox row (message id, consumer) and
// the shipment in one transaction, and acks only after the commit.
//
//   ship-orders --declare                 declare the queue and its bindings, exit
//   ship-orders --expect N [--timeout-s S]  consume until N orders were shipped (or S
//                                         seconds passed: exit 1), then print them
//
// Environment: OUTBOX_PG_DSN, OUTBOX_AMQP_URI (required), OUTBOX_SCHEMA (where the
// inbox table is, migrated by `outbox-relay migrate`; default "outbox"), SHOP_SCHEMA
// (default "shop"), SHOP_EXCHANGE (default "shop"), SHOP_QUEUE (default "shop.shipping").

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

outbox::RunnerOptions runner_options() {
  outbox::RunnerOptions o;
  o.pg_dsn = env_or("OUTBOX_PG_DSN", "");
  o.amqp_uri = env_or("OUTBOX_AMQP_URI", "");
  o.schema = env_or("OUTBOX_SCHEMA", "outbox");
  o.consumer = outbox::ConsumerName("shipping");
  o.queue = env_or("SHOP_QUEUE", "shop.shipping");
  o.bindings = {{env_or("SHOP_EXCHANGE", "shop"), "order.placed", "topic"}};
  o.dead_letter_exchange = o.queue + ".dead-letter";
  outbox::validate_runner_options(o);  // names the field at fault
  return o;
}

// Runs inside the runner's transaction, after the inbox row: a duplicate never gets here.
void ship(pqxx::transaction_base& tx, const outbox::Delivery& delivery, const std::string& shipments) {
  auto order = nlohmann::json::parse(delivery.body);
  outbox::pgx::exec_params0(tx, "INSERT INTO " + shipments + " (order_id, message_id) VALUES ($1, $2)",
                            order.at("order_id").get<long long>(), delivery.message_id.to_string());
}

int consume(const outbox::RunnerOptions& options, const std::string& shipments, unsigned expect,
            std::chrono::seconds timeout) {
  outbox::ConsumerRunner runner(options,
                                [&](pqxx::transaction_base& tx, const outbox::Delivery& d) { ship(tx, d, shipments); });
  runner.start();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (runner.counters().processed < expect && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  runner.stop();
  runner.wait();
  pqxx::connection conn(options.pg_dsn);
  pqxx::read_transaction tx(conn);
  for (const auto& row : tx.exec("SELECT order_id, message_id FROM " + shipments + " ORDER BY order_id"))
    std::cout << "shipped order " << row[0].c_str() << " (event " << row[1].c_str() << ")\n";
  auto c = runner.counters().snapshot();
  std::cout << "processed " << c.processed << ", duplicates skipped " << c.duplicates << "\n";
  return c.processed >= expect ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  unsigned expect = 0;
  int timeout_s = 30;
  try {
    if (mode == "--expect" && (argc == 3 || (argc == 5 && std::string(argv[3]) == "--timeout-s"))) {
      expect = static_cast<unsigned>(std::stoul(argv[2]));
      if (argc == 5) timeout_s = std::stoi(argv[4]);
    } else if (mode != "--declare" || argc != 2) {
      throw std::invalid_argument("unknown arguments");
    }
  } catch (const std::exception&) {
    std::cerr << "usage: ship-orders --declare | --expect N [--timeout-s S]\n";
    return 2;
  }
  try {
    const outbox::RunnerOptions options = runner_options();
    if (mode == "--declare") {
      outbox::ConsumerRunner(options, [](pqxx::transaction_base&, const outbox::Delivery&) {}).declare_topology();
      std::cout << "queue " << options.queue << " bound to " << options.bindings[0].exchange << "\n";
      return 0;
    }
    pqxx::connection conn(options.pg_dsn);
    const std::string shop = conn.quote_name(env_or("SHOP_SCHEMA", "shop"));
    const std::string shipments = shop + ".shipments";
    {
      pqxx::work tx(conn);
      outbox::pgx::exec0(tx, "CREATE SCHEMA IF NOT EXISTS " + shop);
      outbox::pgx::exec0(tx, "CREATE TABLE IF NOT EXISTS " + shipments +
                                 " (order_id bigint PRIMARY KEY, message_id uuid NOT NULL)");
      tx.commit();
    }
    return consume(options, shipments, expect, std::chrono::seconds(timeout_s));
  } catch (const outbox::ValidationError& e) {
    std::cerr << "ship-orders: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ship-orders: " << e.what() << "\n";
    return 1;
  }
}
