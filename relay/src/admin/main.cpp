// outbox-relay: publishes committed outbox rows to RabbitMQ with publisher confirms.
// Subcommands are listed in all_commands() (commands.h); each lives in cmd_*.cpp.

#include <iostream>

#include "admin/commands.h"
#include "config/doc_paths.h"
#include "outbox/one_line.h"

namespace relay {

const std::vector<Command>& all_commands() {
  static const std::vector<Command> commands = {
      {"run", cmd_run, "--config FILE [--exit-when-idle]   publish pending outbox rows", false},
      {"migrate", cmd_migrate,
       "--config FILE                  create or upgrade the schema (safe on a live\n"
       "                          table: UPGRADING.md)",
       false},
      {"check-config", cmd_check_config,
       "FILE [--connect]          validate a configuration file (--connect: and\n"
       "                          reach both servers once, exit 1 if either fails)",
       false},
      {"status", cmd_status, "--config FILE [--json]             backlog: pending, parked, oldest age, by type"},
      {"replay", cmd_replay,
       "--config FILE (--id ID... | --since TIME (--dry-run | --expect N)) [--type T]\n"
       "                          [--json]   publish published rows again, same message id"},
      {"cleanup", cmd_cleanup,
       "--config FILE --older-than AGE [--batch N] [--dry-run] [--json]\n"
       "                          delete old published rows in batches"},
      {"dead", cmd_dead,
       "list --config FILE [--type T] [--limit N] [--json]\n"
       "                          parked rows: id, message id, type, attempts, age, last error\n"
       "  outbox-relay dead requeue --config FILE (--id ID... | (--type T | --all) (--dry-run | --expect N))\n"
       "                          [--json]   parked rows back to pending"},
      {"sequence-audit", cmd_sequence_audit,
       "--config FILE --consumer NAME [--consumer-dsn-file PATH] [--grace AGE] [--json]\n"
       "                          keys a consumer's sequence guard is behind the outbox on"},
  };
  return commands;
}

}  // namespace relay

namespace {

const char* kCommonFlags =
    "  -c FILE and --config=FILE mean --config FILE; any --flag=VALUE means --flag VALUE;\n"
    "  --help (-h) after a command shows its usage\n"
    "exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration\n";

void print_usage(std::ostream& out) {
  out << "usage:\n";
  for (const auto& c : relay::all_commands()) out << "  outbox-relay " << c.name << " " << c.usage << "\n";
  out << "  outbox-relay --help | --version\n"
      << kCommonFlags << "documents: man outbox-relay; OPERATIONS.md, CONFIGURATION.md, UPGRADING.md "
      << relay::kDocsWhere << "\n";
}

bool asks_for_help(const relay::Args& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const relay::Args args = relay::expand_args(relay::Args(argv + 1, argv + argc));
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    print_usage(std::cout);
    return relay::kExitOk;
  }
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "outbox-relay " << OUTBOX_RELAY_VERSION << "\n";
    return relay::kExitOk;
  }
  if (args.empty()) {
    std::cerr << "outbox-relay: missing command\n";
    print_usage(std::cerr);
    return relay::kExitUsage;
  }
  for (const auto& c : relay::all_commands()) {
    if (args[0] != c.name) continue;
    // Commands with a help text of their own (status, replay, cleanup, dead) print it.
    if (!c.has_own_help && asks_for_help(args)) {
      std::cout << "usage: outbox-relay " << c.name << " " << c.usage << "\n" << kCommonFlags;
      return relay::kExitOk;
    }
    try {
      return c.run(relay::Args(args.begin() + 1, args.end()));
    } catch (const relay::UsageError& e) {
      std::cerr << "outbox-relay: " << e.what() << "\n";
      print_usage(std::cerr);
      return relay::kExitUsage;
    }
  }
  std::cerr << "outbox-relay: unknown command '" << outbox::one_line(args[0], 80) << "'\n";
  print_usage(std::cerr);
  return relay::kExitUsage;
}
