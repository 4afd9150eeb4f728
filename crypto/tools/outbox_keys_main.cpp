// outbox-keys: the operator's tool for field-encryption master keys (keys_commands.h).
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "keys_commands.h"
#include "outbox/one_line.h"

namespace {

std::atomic<bool> g_stop{false};

// The first SIGTERM or SIGINT asks rewrap to stop between batches (each batch is one
// transaction); the handler then restores the default, so a second one ends the
// process at once even while it waits on the server (its open batch rolls back).
void on_signal(int sig) {
  g_stop = true;
  std::signal(sig, SIG_DFL);
}

// --keyring PATH or --keyring-env VAR on subcommand `sub`: exactly one when
// `required`, else at most one.
void add_keyring_options(CLI::App& sub, outbox::keys_tool::KeysOptions& o, bool required) {
  auto* group = sub.add_option_group("keyring", "where the keyring is (one of)");
  group->add_option("--keyring", o.keyring_file, "keyring file (YAML, mode 0600)");
  group->add_option("--keyring-env", o.keyring_env, "environment variable holding the keyring YAML");
  if (required) group->require_option(1);
  else group->require_option(0, 1);
}

void add_database_options(CLI::App& sub, outbox::keys_tool::KeysOptions& o) {
  sub.add_option("--schema", o.schema, "the outbox schema")->required();
  sub.add_option("--dsn-env", o.dsn_env, "environment variable holding the PostgreSQL connection string")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  namespace kt = outbox::keys_tool;
  kt::KeysOptions o;
  CLI::App app{"outbox-keys: check a keyring, rewrap subject keys after a master-key rotation, erase a subject"};
  app.require_subcommand(1);
  auto* check = app.add_subcommand("check",
                                   "load a keyring and print its key ids (never key bytes); with --schema, also "
                                   "unwrap a sample of the stored subject keys under each id");
  add_keyring_options(*check, o, true);
  check->add_option("--schema", o.schema, "the outbox schema whose stored keys to try the keyring on");
  check->add_option("--dsn-env", o.dsn_env, "environment variable holding the PostgreSQL connection string")
      ->capture_default_str();
  auto* status = app.add_subcommand("status", "count the subject keys by the master key that wraps them");
  add_database_options(*status, o);
  add_keyring_options(*status, o, false);
  auto* rewrap = app.add_subcommand("rewrap", "rewrap the subject keys under the keyring's active key");
  add_database_options(*rewrap, o);
  add_keyring_options(*rewrap, o, true);
  rewrap->add_option("--batch", o.batch, "subject keys per transaction")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}))
      ->capture_default_str();
  // CLI11 would only say "A subcommand is required" for a misspelt one.
  const std::string first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] != '-' && first != "check" && first != "status" && first != "rewrap" &&
      first != "erase") {
    std::cerr << "outbox-keys: unknown command '" << outbox::one_line(first, 64)
              << "' (expected check, status, rewrap or erase; --help lists them)\n";
    return kt::kUsage;
  }
  auto* erase = app.add_subcommand("erase", "destroy one subject's data key (crypto-shredding; irreversible)");
  add_database_options(*erase, o);
  erase->add_option("--subject", o.subject, "the data subject, e.g. a customer id")
      ->required()
      ->check([](const std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help, or the error naming the option
    return code == 0 ? kt::kOk : kt::kUsage;
  }
  // Only rewrap catches the signals: the other commands write at most one
  // transaction, so the default action (end the process; the server rolls back an
  // open transaction) is the right one for them.
  if (check->parsed()) return kt::check(o, std::cout, std::cerr);
  if (status->parsed()) return kt::status(o, std::cout, std::cerr);
  if (erase->parsed()) return kt::erase(o, std::cout, std::cerr);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return kt::rewrap(o, g_stop, std::cout, std::cerr);
}
