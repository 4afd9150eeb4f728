// outbox-relay run / migrate / check-config.

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "admin/admin_args.h"
#include "admin/commands.h"
#include "admin/connection_check.h"
#include "broker/amqp_publisher.h"
#include "config/config.h"
#include "config/preflight.h"
#include "loop/reconnect_supervisor.h"
#include "loop/relay_loop.h"
#include "metrics/relay_metrics.h"
#include "ops/housekeeper.h"
#include "ops/http_server.h"
#include "ops/logging.h"
#include "outbox/migrator.h"
#include "outbox/one_line.h"
#include "pg/notify_listener.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

// How long an idle relay waits for producer transactions still open (that did not
// notify) before it takes the listener's lock; it polls meanwhile if they last.
constexpr std::chrono::milliseconds kArmLockWait{200};

// The loop's links on the real servers: rabbitmq-c, a libpq session per batch in
// flight (relay.pipeline_depth), the listener's libpqxx session, steady_clock.
RelayLinks relay_links(const RelayConfig& config) {
  RelayLinks links;
  links.broker = std::make_unique<AmqpPublisher>(config.amqp);
  for (int i = 0; i < config.relay.pipeline_depth; ++i)
    links.stores.push_back(std::make_unique<OutboxStore>(config.postgres, StoreOptions::of(config.relay)));
  links.listener = std::make_unique<NotifyListener>(config.postgres, kArmLockWait);
  return links;
}

HttpRoutes http_routes(const RelayConfig& config, RelayMetrics& metrics) {
  const auto stall = std::chrono::seconds(config.http.live_stall_s);
  const auto claim_age = std::chrono::seconds(config.http.ready_max_claim_age_s);
  const auto disconnected = std::chrono::seconds(config.http.live_max_disconnected_s);
  return HttpRoutes{[&metrics] { return metrics.render(); },
                    [&metrics, stall, disconnected] { return metrics.not_alive(stall, disconnected); },
                    [&metrics, claim_age] { return metrics.not_ready(claim_age); }};
}

// Connects once to check privileges and TLS before the loop starts. Waits (with
// the loop's backoff, log lines and metrics: ReconnectSupervisor) while PostgreSQL
// is unreachable, since a relay may start before its database. Returns false if
// stopped meanwhile; throws PreflightError.
bool wait_and_preflight(const RelayConfig& config, const std::atomic<bool>& stop, RelayMetrics& metrics) {
  ReconnectSupervisor reconnect;
  while (!stop) {
    try {
      auto conn_owner = connect_postgres(config.postgres);
      auto& conn = *conn_owner;
      preflight(conn, config);
      return true;
    } catch (const pqxx::failure& e) {
      // A server that is down, going down or starting up (SQLSTATE classes 08 and
      // 57 included) is waited for; any other SQL error is not.
      const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
      if (sql && sql->sqlstate().rfind("08", 0) != 0 && sql->sqlstate().rfind("57", 0) != 0) throw;
      const auto text = outbox::one_line(e.what());
      const auto failed = report_connect_failure(reconnect, metrics, ConnectTarget::kPostgres, text,
                                                 classify_postgres_failure(text), std::chrono::steady_clock::now());
      const auto until = std::chrono::steady_clock::now() + failed.wait;
      while (!stop && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return false;
}

}  // namespace

std::string parse_config_flag(const std::string& command, const Args& args,
                              const std::vector<std::pair<std::string, bool*>>& flags) {
  std::string config;
  bool config_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file name");
      if (config_given) throw UsageError("--config given twice");  // which one was meant?
      config_given = true;
      config = args[++i];
      continue;
    }
    bool matched = false;
    for (const auto& [flag, target] : flags)
      if (args[i] == flag) *target = matched = true;
    if (!matched) throw UsageError("unknown argument '" + outbox::one_line(args[i], 80) + "' for " + command);
  }
  if (config.empty()) throw UsageError(command + " needs --config FILE");
  return config;
}

int cmd_check_config(const Args& args) {
  bool connect = false;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--connect") connect = true;
    else if (a == "--config" && i + 1 < args.size()) files.push_back(args[++i]);  // as the other commands take it
    else if (a.rfind("--", 0) == 0)
      throw UsageError("unknown argument '" + outbox::one_line(a, 80) + "' for check-config");
    else files.push_back(a);
  }
  if (files.size() != 1)
    throw UsageError(files.empty() ? "check-config needs a FILE" : "check-config takes exactly one FILE");
  auto config = load_config_or_report(files[0]);
  if (!config) return kExitUsage;
  for (const auto& w : config->warnings) std::cerr << "warning: " << w << "\n";
  std::cout << files[0] << ": valid" << (config->warnings.empty() ? "" : " (with warnings)") << "\n";
  // `run` waits for servers that are not up yet; --connect is the fail-fast check.
  if (connect && !check_connections(*config, std::cout)) return kExitFailure;
  return kExitOk;
}

int cmd_migrate(const Args& args) {
  auto config = load_config_or_report(parse_config_flag("migrate", args));
  if (!config) return kExitUsage;
  try {
    auto conn_owner = connect_postgres(config->postgres);
    auto& conn = *conn_owner;
    auto result = outbox::Migrator(config->postgres.schema).migrate(conn);
    std::cout << "schema '" << config->postgres.schema << "': ";
    if (result.applied.empty()) std::cout << "up to date at version " << result.version << "\n";
    else std::cout << "applied " << result.applied.size() << " migration(s), now at version " << result.version << "\n";
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "migrate failed: " << outbox::one_line(e.what()) << "\n";
    return kExitFailure;
  }
}

namespace {

// Why: a batch of large payloads allocates and frees megabytes (libpq's result, each
// row's copy). With glibc's default 128 KiB trim threshold every batch hands those
// pages back to the kernel and the next one faults them in again, zeroed: measured as
// the relay's largest cost on 64 KiB payloads (docs/perf/NOTEBOOK.md, "Big payloads").
// Keeping up to 32 MiB of freed heap costs no more than the peak the batch reached;
// blocks over 8 MiB (a hand-written giant row) are mapped and unmapped on their own.
void keep_freed_heap_for_the_next_batch() {
  mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
}

}  // namespace

int cmd_run(const Args& args) {
  keep_freed_heap_for_the_next_batch();
  bool exit_when_idle = false;
  auto config = load_config_or_report(parse_config_flag("run", args, {{"--exit-when-idle", &exit_when_idle}}));
  if (!config) return kExitUsage;
  setup_logging(config->log);

  std::atomic<bool> stop{false};
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {} received: finishing the batch in flight", signal);
    stop = true;
  });
  for (const auto& w : config->warnings) spdlog::warn("configuration: {}", w);

  outbox::metrics::Registry registry;
  RelayMetrics metrics(registry, OUTBOX_RELAY_VERSION);
  std::unique_ptr<HttpServer> http;
  if (!config->http.listen.empty()) {
    try {
      http = std::make_unique<HttpServer>(io, config->http.listen, http_routes(*config, metrics));
    } catch (const HttpServerError& e) {
      spdlog::critical("http.listen: {}", outbox::one_line(e.what()));
      return kExitFailure;
    }
    http->start();
    spdlog::info("serving /metrics, /healthz and /readyz on http://{}", http->local_address());
  }
  std::thread signal_thread([&] { io.run(); });
  int code = kExitFailure;
  try {
    if (wait_and_preflight(*config, stop, metrics)) {
      Housekeeper housekeeper(*config, metrics);
      housekeeper.start();
      RelayLoop loop(*config, relay_links(*config), stop, &metrics);
      code = loop.run(exit_when_idle);
    } else {
      code = kExitOk;  // stopped while waiting for PostgreSQL
    }
  } catch (const PreflightError& e) {
    spdlog::critical("relay cannot start: {}", outbox::one_line(e.what()));
  } catch (const std::exception& e) {
    spdlog::critical("relay failed: {}", outbox::one_line(e.what()));
  }
  if (http) http->stop();
  io.stop();
  signal_thread.join();
  return code;
}

}  // namespace relay
