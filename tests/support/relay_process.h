#pragma once
// RelayProcess: the real outbox-relay binary as a child process.

#include <sys/types.h>

#include <string>
#include <vector>

namespace testenv {

// Default relay YAML for a test schema (batch and timing small enough for tests).
// `extra_relay` is appended inside the relay: section (indented lines); a key it
// sets replaces the default of that key.
std::string relay_config_yaml(const std::string& schema, const std::string& extra_relay = "");

// Writes `yaml` to a temporary file, starts `outbox-relay run --config FILE` with
// stderr (the log) captured to a file. The destructor kills a still running child.
class RelayProcess {
 public:
  explicit RelayProcess(const std::string& yaml, bool exit_when_idle = false);
  ~RelayProcess();
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;

  void signal(int sig);
  // Waits for the exit; returns the exit code, or 128+signal when killed.
  int wait();
  bool running();
  std::string log() const;
  pid_t pid() const { return pid_; }

 private:
  std::string config_path_, log_path_;
  pid_t pid_ = -1;
  int status_ = -1;
};

// Runs the relay binary with `args` (no shell), returns {exit code, stdout+stderr}.
struct CommandResult {
  int exit_code;
  std::string output;
};
CommandResult run_relay_command(const std::vector<std::string>& args);
// Runs any program (argv[0] an absolute path; no shell, the test's environment), the same way.
CommandResult run_command(const std::vector<std::string>& argv);

// Writes `text` to a fresh temporary file and returns its path.
std::string write_temp_file(const std::string& text, const std::string& suffix = ".yaml");

}  // namespace testenv
