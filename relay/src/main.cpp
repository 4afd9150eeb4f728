// outbox-relay: publishes committed outbox rows to RabbitMQ with publisher confirms.
//
//   outbox-relay run --config FILE [--exit-when-idle]
//   outbox-relay migrate --config FILE
//   outbox-relay check-config FILE
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad configuration.

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>
#include <pqxx/pqxx>
#include <thread>

#include "config.h"
#include "logging.h"
#include "one_line.h"
#include "outbox/migrator.h"
#include "outbox_store.h"
#include "relay_loop.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

const char* kUsage =
    "usage:\n"
    "  outbox-relay run --config FILE [--exit-when-idle]   publish pending outbox rows\n"
    "  outbox-relay migrate --config FILE                  create or upgrade the schema\n"
    "  outbox-relay check-config FILE                      validate a configuration file\n"
    "  outbox-relay --help | --version\n";

struct Args {
  std::string command;
  std::string config;
  bool exit_when_idle = false;
};

// Throws std::invalid_argument naming the argument at fault.
Args parse_args(int argc, char** argv) {
  if (argc < 2) throw std::invalid_argument("missing command");
  Args a;
  a.command = argv[1];
  if (a.command != "run" && a.command != "migrate" && a.command != "check-config")
    throw std::invalid_argument("unknown command '" + relay::one_line(a.command, 80) + "'");
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && a.command != "check-config") {
      if (++i >= argc) throw std::invalid_argument("--config needs a file name");
      a.config = argv[i];
    } else if (arg == "--exit-when-idle" && a.command == "run") {
      a.exit_when_idle = true;
    } else if (a.command == "check-config" && a.config.empty() && arg.rfind("--", 0) != 0) {
      a.config = arg;
    } else {
      throw std::invalid_argument("unknown argument '" + relay::one_line(arg, 80) + "' for " + a.command);
    }
  }
  if (a.config.empty())
    throw std::invalid_argument(a.command == "check-config" ? "check-config needs a FILE"
                                                            : a.command + " needs --config FILE");
  return a;
}

int run_relay(const relay::RelayConfig& config, bool exit_when_idle) {
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
    relay::RelayLoop loop(config, stop);
    code = loop.run(exit_when_idle);
  } catch (const std::exception& e) {
    spdlog::critical("relay failed: {}", relay::one_line(e.what()));
  }
  io.stop();
  signal_thread.join();
  return code;
}

int migrate(const relay::RelayConfig& config) {
  try {
    pqxx::connection conn(relay::dsn_with_session_options(config.postgres));
    auto result = outbox::Migrator(config.postgres.schema).migrate(conn);
    if (result.applied.empty())
      std::cout << "schema '" << config.postgres.schema << "' is up to date at version "
                << result.version << "\n";
    else
      std::cout << "schema '" << config.postgres.schema << "': applied " << result.applied.size()
                << " migration(s), now at version " << result.version << "\n";
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "migrate failed: " << relay::one_line(e.what()) << "\n";
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::cout << "outbox-relay " << OUTBOX_RELAY_VERSION << "\n";
    return kExitOk;
  }
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "outbox-relay: " << e.what() << "\n" << kUsage;
    return kExitUsage;
  }
  relay::RelayConfig config;
  try {
    config = relay::load_config(args.config);
  } catch (const relay::ConfigError& e) {
    std::cerr << "outbox-relay: invalid configuration: " << e.what() << "\n";
    return kExitUsage;
  }
  if (args.command == "check-config") {
    std::cout << args.config << ": valid\n";
    return kExitOk;
  }
  relay::setup_logging(config.log);
  if (args.command == "migrate") return migrate(config);
  return run_relay(config, args.exit_when_idle);
}
