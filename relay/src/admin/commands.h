#pragma once
// The outbox-relay subcommands. Each takes the arguments after its name and
// returns the process exit code: 0 success, 1 runtime failure, 2 bad usage or
// bad configuration. Each lives in its own cmd_*.cpp.

#include <stdexcept>
#include <string>
#include <vector>

namespace relay {

using Args = std::vector<std::string>;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int cmd_run(const Args& args);             // run --config FILE [--exit-when-idle]
int cmd_migrate(const Args& args);         // migrate --config FILE
int cmd_check_config(const Args& args);    // check-config FILE
int cmd_status(const Args& args);          // status --config FILE [--json]      (cmd_status.cpp)
int cmd_replay(const Args& args);          // replay --config FILE --id.../--since (cmd_replay.cpp)
int cmd_cleanup(const Args& args);         // cleanup --config FILE --older-than   (cmd_cleanup.cpp)
int cmd_dead(const Args& args);            // dead list|requeue --config FILE ... (cmd_dead.cpp)
int cmd_sequence_audit(const Args& args);  // sequence-audit --config FILE --consumer NAME (cmd_sequence_audit.cpp)

struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* usage;  // one line: arguments and what it does
  // Prints its own --help (through AdminArgs); otherwise main prints `usage`.
  bool has_own_help = true;
};

// Every subcommand, in the order --help lists them. Add new commands here.
const std::vector<Command>& all_commands();

// Shared by commands: parses "--config FILE" (and the flags in `flags`, which are
// set to true when present) from args; throws UsageError naming the argument at fault.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// The command line as the commands parse it: "--flag=VALUE" becomes "--flag" "VALUE"
// and "-c" becomes "--config", so every command takes "-c FILE", "--config FILE" and
// "--config=FILE" alike. Pure.
Args expand_args(const Args& args);

std::string parse_config_flag(const std::string& command, const Args& args,
                              const std::vector<std::pair<std::string, bool*>>& flags = {});

}  // namespace relay
