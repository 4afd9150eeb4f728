// billing-consumer: the billing service. Consumes OrderPlaced from its own queue,
// creates one invoice and takes one charge per order, however often the event
// arrives, and prints a summary when it stops.
//
//   billing-consumer [--declare] [--concurrency N] [--gateway-latency-ms MS]
//                    [--exit-when-idle-ms MS] [--schema NAME] [--queue NAME]
//
// Reads OUTBOX_PG_DSN and OUTBOX_AMQP_URI. Queue "billing.order-placed" (durable) is
// bound to exchange "orders" with "order.placed"; rejected messages go to exchange
// "billing.dead-letter" and queue "billing.order-placed.dead-letter". --declare only
// declares them (run it before the first event is published). SIGTERM/SIGINT finish
// the in-flight messages and exit 0; so does --exit-when-idle-ms after that long
// without a delivery.

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <iostream>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "billing_schema.h"
#include "fake_payment_gateway.h"
#include "invoice_handler.h"
#include "outbox/consumer_runner.h"
#include "outbox/errors.h"
#include "outbox/inbox_retention.h"
#include "outbox/pg_connection.h"
#include "outbox/pqxx_compat.h"

namespace {

struct Args {
  bool declare_only = false;
  int concurrency = 4;
  int latency_ms = 200;
  int idle_exit_ms = 0;  // 0: run until a signal
  std::string schema = "billing";
  std::string queue = "billing.order-placed";
  bool quorum = false;  // a quorum queue (a RabbitMQ cluster), with x-delivery-limit
};

int parse_int(const std::string& flag, const char* value, int lo, int hi) {
  try {
    std::size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == std::string(value).size() && n >= lo && n <= hi) return n;
  } catch (...) {
  }
  throw std::invalid_argument(flag + ": expected an integer in " + std::to_string(lo) + "-" + std::to_string(hi) +
                              ", got '" + value + "'");
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    bool has_value = i + 1 < argc;
    if (f == "--declare") a.declare_only = true;
    else if (f == "--quorum") a.quorum = true;
    else if (f == "--concurrency" && has_value) a.concurrency = parse_int(f, argv[++i], 1, 256);
    else if (f == "--gateway-latency-ms" && has_value) a.latency_ms = parse_int(f, argv[++i], 0, 60000);
    else if (f == "--exit-when-idle-ms" && has_value) a.idle_exit_ms = parse_int(f, argv[++i], 1, 3600000);
    else if (f == "--schema" && has_value) a.schema = argv[++i];
    else if (f == "--queue" && has_value) a.queue = argv[++i];
    else throw std::invalid_argument("unknown argument '" + f + "'");
  }
  return a;
}

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::invalid_argument(std::string(name) + " is not set");
  return v;
}

// Stops the runner once no delivery was settled for `idle`.
void stop_when_idle(outbox::ConsumerRunner& runner, std::chrono::milliseconds idle) {
  auto settled = [&] {
    auto c = runner.counters().snapshot();
    return c.processed + c.duplicates + c.dead_lettered + c.retried;
  };
  auto last = settled();
  auto last_change = std::chrono::steady_clock::now();
  while (!runner.stopping()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now_settled = settled();
    if (now_settled != last) {
      last = now_settled;
      last_change = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_change >= idle) {
      spdlog::info("billing: idle for {} ms, stopping", idle.count());
      runner.stop();
    }
  }
}

// Runs until SIGTERM/SIGINT, or (idle_exit_ms > 0) until no message came for that long.
void run(outbox::ConsumerRunner& runner, int idle_exit_ms) {
  std::thread idle_watch;
  if (idle_exit_ms > 0)
    idle_watch = std::thread([&] { stop_when_idle(runner, std::chrono::milliseconds(idle_exit_ms)); });
  try {
    runner.run_until_signal();
  } catch (...) {
    runner.stop();
    if (idle_watch.joinable()) idle_watch.join();
    throw;
  }
  if (idle_watch.joinable()) idle_watch.join();
}

// The runner's settings: the servers from the environment, the rest from `args`.
// Throws ValidationError naming the field at fault.
outbox::RunnerOptions runner_options(const Args& args) {
  outbox::RunnerOptions options;
  options.pg_dsn = required_env("OUTBOX_PG_DSN");
  // OUTBOX_AMQP_URIS (a cluster's nodes, separated by spaces) or OUTBOX_AMQP_URI.
  if (const char* uris = std::getenv("OUTBOX_AMQP_URIS"); uris && *uris) {
    std::istringstream in(uris);
    for (std::string u; in >> u;) options.amqp_uris.push_back(u);
    options.amqp_endpoint_order = outbox::amqp::EndpointOrder::kShuffled;
  } else {
    options.amqp_uri = required_env("OUTBOX_AMQP_URI");
  }
  options.schema = args.schema;
  options.consumer = outbox::ConsumerName("billing");
  options.queue = args.queue;
  options.bindings = {{"orders", "order.placed", "topic"}};
  options.dead_letter_exchange = "billing.dead-letter";
  options.concurrency = args.concurrency;
  if (args.quorum) {
    options.queue_type = outbox::QueueType::kQuorum;
    // A handler that crashes the process on some message: the broker dead-letters
    // it after this many deliveries (the runner retries max_attempts per process).
    options.delivery_limit = 4 * options.max_attempts;
  }
  options.retention = outbox::RetentionPolicy{};  // 30 days, behind a 14-day redelivery horizon
  outbox::validate_runner_options(options);
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("billing"));
  Args args;
  outbox::RunnerOptions options;
  try {
    args = parse_args(argc, argv);
    options = runner_options(args);
  } catch (const std::exception& e) {
    std::cerr << "billing-consumer: " << e.what()
              << "\nusage: billing-consumer [--declare] [--quorum] [--concurrency N] [--gateway-latency-ms MS] "
                 "[--exit-when-idle-ms MS] [--schema NAME] [--queue NAME]\n";
    return 2;
  }
  try {
    billing::FakePaymentGateway gateway{std::chrono::milliseconds(args.latency_ms)};
    billing::InvoiceHandler handler({args.schema, billing::InvoiceStrategy::kNaturalKey, true}, gateway);
    outbox::ConsumerRunner runner(options, std::ref(handler));
    if (args.declare_only) {
      runner.declare_topology();
      std::cout << "billing-consumer: queue '" << options.queue << "' bound to 'orders' (order.placed), "
                << "dead letters to '" << options.dead_letter_exchange << "'\n";
      return 0;
    }

    auto conn_owner = outbox::open_pg_connection(options.pg_dsn);  // errors never show the password
    auto& conn = *conn_owner;
    billing::create_billing_schema(conn, args.schema);
    auto purged = outbox::InboxRetention(args.schema, *options.retention).purge(conn);
    std::string started_at = outbox::pgx::exec1(pqxx::nontransaction(conn), "SELECT now()")[0].c_str();
    std::cout << "billing-consumer: " << args.concurrency << " workers, gateway latency " << args.latency_ms
              << " ms; inbox cleanup removed " << purged.removed << " rows older than "
              << outbox::format_duration(options.retention->retention) << "\n";

    run(runner, args.idle_exit_ms);

    auto c = runner.counters().snapshot();
    auto invoices = outbox::pgx::exec_params1(pqxx::nontransaction(conn),
                                              "SELECT count(*) FROM " + args.schema +
                                                  ".invoices WHERE created_at >= $1::timestamptz",
                                              started_at)[0];
    std::cout << "billing-consumer: invoices created " << invoices.as<long long>() << ", duplicates skipped "
              << c.duplicates << ", charges taken " << gateway.charges_taken() << " (" << gateway.total_taken_cents()
              << " cents), dead-lettered " << c.dead_lettered << ", failed tries " << c.failed << ", late deliveries "
              << c.late_deliveries << "\n";
    return 0;
  } catch (const outbox::ValidationError& e) {
    std::cerr << "billing-consumer: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "billing-consumer: " << e.what() << "\n";
    return 1;
  }
}
