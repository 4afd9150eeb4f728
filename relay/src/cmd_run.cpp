// outbox-relay run / migrate / check-config.

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>
#include <pqxx/pqxx>
#include <thread>

#include "commands.h"
#include "config.h"
#include "logging.h"
#include "one_line.h"
#include "outbox/migrator.h"
#include "outbox_store.h"
#include "relay_loop.h"

namespace relay {
namespace {

// Loads the file named by --config; prints the error and returns nullopt when bad.
std::optional<RelayConfig> load_or_report(const std::string& path) {
  try {
    return load_config(path);
  } catch (const ConfigError& e) {
    std::cerr << "outbox-relay: invalid configuration: " << e.what() << "\n";
    return std::nullopt;
  }
}

}  // namespace

std::string parse_config_flag(const std::string& command, const Args& args,
                              const std::vector<std::pair<std::string, bool*>>& flags) {
  std::string config;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file name");
      config = args[++i];
      continue;
    }
    bool matched = false;
    for (const auto& [flag, target] : flags)
      if (args[i] == flag) *target = matched = true;
    if (!matched) throw UsageError("unknown argument '" + one_line(args[i], 80) + "' for " + command);
  }
  if (config.empty()) throw UsageError(command + " needs --config FILE");
  return config;
}

int cmd_check_config(const Args& args) {
  if (args.size() != 1 || args[0].rfind("--", 0) == 0)
    throw UsageError(args.empty() ? "check-config needs a FILE" : "check-config takes exactly one FILE");
  if (!load_or_report(args[0])) return kExitUsage;
  std::cout << args[0] << ": valid\n";
  return kExitOk;
}

int cmd_migrate(const Args& args) {
  auto config = load_or_report(parse_config_flag("migrate", args));
  if (!config) return kExitUsage;
  try {
    pqxx::connection conn(dsn_with_session_options(config->postgres));
    auto result = outbox::Migrator(config->postgres.schema).migrate(conn);
    std::cout << "schema '" << config->postgres.schema << "': ";
    if (result.applied.empty()) std::cout << "up to date at version " << result.version << "\n";
    else std::cout << "applied " << result.applied.size() << " migration(s), now at version " << result.version << "\n";
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "migrate failed: " << one_line(e.what()) << "\n";
    return kExitFailure;
  }
}

int cmd_run(const Args& args) {
  bool exit_when_idle = false;
  auto config = load_or_report(parse_config_flag("run", args, {{"--exit-when-idle", &exit_when_idle}}));
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
  std::thread signal_thread([&] { io.run(); });
  int code = kExitFailure;
  try {
    RelayLoop loop(*config, stop);
    code = loop.run(exit_when_idle);
  } catch (const std::exception& e) {
    spdlog::critical("relay failed: {}", one_line(e.what()));
  }
  io.stop();
  signal_thread.join();
  return code;
}

}  // namespace relay
