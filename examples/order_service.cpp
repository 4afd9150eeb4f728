// order-service: an example service that writes orders and their OrderPlaced events
// in one transaction each, through the producer SDK, with the customer's personal
// data (name, e-mail, phones, address, gift messages) encrypted field by field.
//
//   order-service --orders N [--rollback-every K] [--keyring FILE] [--schemas DIR]
//
// Reads OUTBOX_PG_DSN. Orders go to shop.orders, events to the outbox in schema
// "outbox" (exchange "orders", routing key "order.placed"). Every K-th order is
// rolled back on purpose: neither the order nor its event may ever appear.
//
// Keys: $OUTBOX_KEYRING (the keyring YAML itself) if set, else the keyring file
// --keyring FILE, else $OUTBOX_KEYRING_FILE, else $OUTBOX_LOCAL_DIR/keyring.yaml.
// A missing file is created with one fresh random key and mode 0600 (a demo
// convenience: in production the keyring comes from your secret store).

#include <sys/stat.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>

#include "outbox/errors.h"
#include "outbox/field_encryptor.h"
#include "outbox/keyring.h"
#include "outbox/migrator.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "outbox/schema_registry.h"

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

struct Args {
  int orders = 100;
  int rollback_every = 0;
  std::string keyring_file;
  std::string schemas = OUTBOX_EVENT_SCHEMA_DIR;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The keyring, and a description of where it came from (never its contents).
std::pair<std::shared_ptr<const outbox::Keyring>, std::string> load_keyring(const Args& args) {
  if (std::getenv("OUTBOX_KEYRING"))
    return {std::make_shared<outbox::Keyring>(outbox::Keyring::from_env("OUTBOX_KEYRING")), "$OUTBOX_KEYRING"};
  std::string path = args.keyring_file;
  if (path.empty())
    path = env_or("OUTBOX_KEYRING_FILE", env_or("OUTBOX_LOCAL_DIR", "/tmp/outbox-relay-local") + "/keyring.yaml");
  struct stat st {};
  std::string origin = path;
  if (::stat(path.c_str(), &st) != 0) {
    // A fresh id per created keyring: two different keys never share an id.
    char id[32];
    std::time_t now = std::time(nullptr);
    std::strftime(id, sizeof id, "demo-%Y%m%d%H%M%S", std::gmtime(&now));
    outbox::Keyring::create_file(path, id);
    origin += ", created with mode 0600";
  }
  return {std::make_shared<outbox::Keyring>(outbox::Keyring::load_file(path)), origin};
}

// Sensitive customer data for order n: varied, so the demo shows distinct ciphertexts.
nlohmann::json order_placed(long long order_id, int n, long long total) {
  static const char* names[] = {"Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov"};
  const int c = n % 17;
  const std::string name = names[c % 5];
  nlohmann::json line = {{"sku", "SKU-" + std::to_string(n % 9)}, {"quantity", 1 + n % 3}, {"price_cents", total}};
  if (n % 4 == 0) line["gift_message"] = "Happy birthday, " + name + "!";
  return {{"order_id", order_id},
          {"total_cents", total},
          {"currency", "EUR"},
          {"customer",
           {{"id", "customer-" + std::to_string(c)},
            {"name", name},
            {"email", "customer" + std::to_string(c) + "@example.org"},
            {"phones", {"+44 20 7946 0" + std::to_string(100 + c)}},
            {"address",
             {{"street", std::to_string(c + 1) + " Example Street"},
              {"city", "London"},
              {"postcode", "NW1 " + std::to_string(c) + "AA"},
              {"country", "GB"}}}}},
          {"lines", nlohmann::json::array({line})}};
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--orders" && i + 1 < argc) args.orders = parse_int(a, argv[++i]);
    else if (a == "--rollback-every" && i + 1 < argc) args.rollback_every = parse_int(a, argv[++i]);
    else if (a == "--keyring" && i + 1 < argc) args.keyring_file = argv[++i];
    else if (a == "--schemas" && i + 1 < argc) args.schemas = argv[++i];
    else throw std::invalid_argument("unknown argument '" + a + "'");
  }
  return args;
}

// The business table the example writes beside its events.
void create_shop_tables(pqxx::connection& conn) {
  pqxx::work tx(conn);
  tx.exec("CREATE SCHEMA IF NOT EXISTS shop");
  tx.exec(
      "CREATE TABLE IF NOT EXISTS shop.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
      "customer text NOT NULL, total_cents bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())");
  tx.commit();
}

// Places args.orders orders, each with its OrderPlaced event in the same
// transaction; every rollback_every-th is rolled back on purpose (event and all).
std::pair<int, int> write_orders(pqxx::connection& conn, const outbox::OutboxWriter& writer, const Args& args) {
  int committed = 0, rolled_back = 0;
  for (int n = 1; n <= args.orders; ++n) {
    pqxx::work tx(conn);
    std::string customer = "customer-" + std::to_string(n % 17);  // an id, not personal data
    long long total = 1000 + (n * 137) % 9000;
    auto order_id =
        outbox::pgx::exec_params1(tx, "INSERT INTO shop.orders (customer, total_cents) VALUES ($1, $2) RETURNING id",
                                  customer, total)[0]
            .as<long long>();
    outbox::Message event;
    event.exchange = outbox::Exchange("orders");
    event.routing_key = outbox::RoutingKey("order.placed");
    event.type = outbox::MessageType("OrderPlaced");
    event.ordering_key = std::to_string(order_id);
    event.payload = order_placed(order_id, n, total).dump();
    writer.enqueue(tx, event);
    if (args.rollback_every > 0 && n % args.rollback_every == 0) {
      tx.abort();
      ++rolled_back;
    } else {
      tx.commit();
      ++committed;
    }
  }
  return {committed, rolled_back};
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what()
              << "\nusage: order-service --orders N [--rollback-every K] [--keyring FILE] [--schemas DIR]\n";
    return 2;
  }
  const char* dsn = std::getenv("OUTBOX_PG_DSN");
  if (!dsn) {
    std::cerr << "order-service: OUTBOX_PG_DSN is not set\n";
    return 2;
  }
  std::shared_ptr<const outbox::Keyring> keyring;
  std::string keyring_origin;
  std::shared_ptr<const outbox::SchemaRegistry> schemas;
  try {
    std::tie(keyring, keyring_origin) = load_keyring(args);
    schemas = std::make_shared<outbox::SchemaRegistry>(outbox::SchemaRegistry::load_directory(args.schemas));
  } catch (const outbox::ValidationError& e) {  // bad keyring or schema: the message names it, never a key
    std::cerr << "order-service: " << e.what() << "\n";
    return 2;
  }
  try {
    pqxx::connection conn(dsn);
    outbox::Migrator("outbox").migrate(conn);
    create_shop_tables(conn);
    outbox::WriterOptions options;
    options.schema = "outbox";
    options.event_schemas = schemas;
    options.require_event_schema = true;
    options.encryptor = std::make_shared<outbox::FieldEncryptor>(keyring,
                                                                 std::make_shared<outbox::SubjectKeyStore>("outbox",
                                                                                                           keyring));
    outbox::OutboxWriter writer(options);
    const auto [committed, rolled_back] = write_orders(conn, writer, args);
    std::cout << "order-service: " << committed << " orders written with their OrderPlaced events, " << rolled_back
              << " rolled back on purpose; customer fields encrypted under key '" << keyring->active_id()
              << "' (keyring " << keyring_origin << ")\n";
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
