// The outbox-relay binary's command line: usage errors and bad configuration files
// exit non-zero with a message naming the key at fault.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "relay_process.h"
#include "test_text.h"

using testenv::run_relay_command;
using testenv::write_temp_file;

namespace {

const std::string kGood =
    "postgres:\n  dsn: host=127.0.0.1 user=postgres password=pg-secret-1\n"
    "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:5672/\n";

using testenv::contains;

testenv::CommandResult check_config(const std::string& yaml) {
  return run_relay_command({"check-config", write_temp_file(yaml)});
}

}  // namespace

TEST_CASE("check-config says a valid file is valid and exits 0") {
  auto r = check_config(kGood);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "valid"));
}

TEST_CASE("bad configuration files exit 2 and name the key, never the secret") {
  struct Case {
    std::string yaml, expected;
  };
  std::vector<Case> cases = {
      {"postgres: [\n", "malformed YAML"},
      {kGood + "relay:\n  batch_sise: 10\n", "relay.batch_sise: unknown key"},
      {kGood + "relay:\n  batch_size: ten\n", "relay.batch_size: expected an integer, got 'ten'"},
      {kGood + "relay:\n  batch_size: 0\n", "relay.batch_size: must be between 1 and 100000, got 0"},
      {kGood + "relay:\n  poll_interval_ms: -1\n", "relay.poll_interval_ms: must be between"},
      {"postgres:\n  dsn: x\n  schema: \"a;drop\"\namqp:\n  uri: amqp://h/\n",
       "postgres.schema: 'a;drop' is not a plain identifier"},
      {kGood + "amqp2:\n  x: 1\n", "amqp2: unknown section"},
      {"postgres:\n  dsn: x\namqp:\n  uri: amqp://h/\n  heartbeat_s: 60\n  confirm_timeout_ms: 1000\n",
       "amqp.confirm_timeout_ms: must be at least amqp.heartbeat_s"},
      {"postgres:\n  dsn: ${OUTBOX_SURELY_UNSET_VAR}\namqp:\n  uri: amqp://h/\n",
       "postgres.dsn: environment variable 'OUTBOX_SURELY_UNSET_VAR' is not set"},
  };
  for (const auto& c : cases) {
    auto r = check_config(c.yaml);
    CHECK_MESSAGE(r.exit_code == 2, c.expected);
    CHECK_MESSAGE(contains(r.output, c.expected), r.output);
    CHECK_FALSE(contains(r.output, "pg-secret-1"));
    CHECK_FALSE(contains(r.output, "amqp-secret-2"));
  }
}

TEST_CASE("run and migrate refuse a bad file before connecting") {
  auto path = write_temp_file(kGood + "relay:\n  batch_size: 0\n");
  for (std::string cmd : {"run", "migrate"}) {
    auto r = run_relay_command({cmd, "--config", path});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "relay.batch_size"));
  }
  auto missing = run_relay_command({"run", "--config", "/nonexistent/relay.yaml"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.output, "/nonexistent/relay.yaml: cannot read"));
}

TEST_CASE("unknown commands and flags exit 2 with the usage") {
  auto r = run_relay_command({"publish-everything"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "unknown command 'publish-everything'"));
  CHECK(contains(r.output, "usage:"));
  r = run_relay_command({"run", "--config", "x.yaml", "--fast"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "unknown argument '--fast'"));
  r = run_relay_command({"run"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "run needs --config FILE"));
  r = run_relay_command({});
  CHECK(r.exit_code == 2);
  CHECK(run_relay_command({"--help"}).exit_code == 0);
}

TEST_CASE("an unreachable database makes migrate fail with exit 1 and no password in the output") {
  auto path = write_temp_file(
      "postgres:\n  dsn: host=127.0.0.1 port=1 user=postgres password=pg-secret-1 connect_timeout=2\n"
      "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:1/\n");
  auto r = run_relay_command({"migrate", "--config", path});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "migrate failed"));
  CHECK_FALSE(contains(r.output, "pg-secret-1"));
}

TEST_CASE("check-config --connect fails fast with exit 1 on unreachable servers, naming them without secrets") {
  auto path = write_temp_file(
      "postgres:\n  dsn: host=127.0.0.1 port=1 user=postgres password=pg-secret-1\n  connect_timeout_s: 2\n"
      "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:1/\n  connect_timeout_ms: 2000\n");
  auto r = run_relay_command({"check-config", path, "--connect"});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, ": valid"), r.output);  // the file itself is fine
  CHECK_MESSAGE(contains(r.output, "postgres: FAILED: "), r.output);
  CHECK_MESSAGE(contains(r.output, "amqp: FAILED: cannot connect to 127.0.0.1:1/"), r.output);
  CHECK_FALSE(contains(r.output, "pg-secret-1"));
  CHECK_FALSE(contains(r.output, "amqp-secret-2"));
  // Each error is one line: the AMQP line follows the PostgreSQL line directly.
  auto pg = r.output.find("postgres: FAILED: ");
  REQUIRE(pg != std::string::npos);
  CHECK(r.output.compare(r.output.find('\n', pg) + 1, 14, "amqp: FAILED: ") == 0);
}

TEST_CASE("a malformed DSN or AMQP URI is a configuration error (exit 2), not a relay that retries forever") {
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"postgres:\n  dsn: host=127.0.0.1 port=5432x password=pg-secret-1\n"
            "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:5672/\n",
            "postgres.dsn: port '5432x' is not a number from 1 to 65535"},
           {"postgres:\n  dsn: host=127.0.0.1 password pg-secret-1\n"
            "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:5672/\n",
            "postgres.dsn: not a valid libpq connection string or URI"},
           {"postgres:\n  dsn: host=127.0.0.1 password=pg-secret-1\n"
            "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:notaport/\n",
            "amqp.uri: not a valid amqp://"}}) {
    auto path = write_temp_file(yaml);
    for (std::string cmd : {"run", "migrate"}) {
      auto r = run_relay_command({cmd, "--config", path});
      CHECK_MESSAGE(r.exit_code == 2, std::string(cmd + ": " + r.output));
      CHECK_MESSAGE(contains(r.output, expected), r.output);
      CHECK_FALSE(contains(r.output, "pg-secret-1"));
      CHECK_FALSE(contains(r.output, "amqp-secret-2"));
    }
  }
}

TEST_CASE("dead: unknown subcommands, flags and selectors exit 2 before anything is read or written") {
  auto path = write_temp_file(kGood);  // its servers do not exist: usage errors come first
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  std::vector<Case> cases = {
      {{"dead"}, "dead needs a subcommand: list or requeue"},
      {{"dead", "purge", "--config", path}, "unknown dead subcommand 'purge'"},
      {{"dead", "list", "--config", path, "--all"}, "unknown argument '--all' for dead list"},
      {{"dead", "list", "--config", path, "--limit", "0"}, "--limit must be a whole number from 1"},
      {{"dead", "requeue", "--config", path}, "dead requeue needs exactly one of --id ID..., --type T or --all"},
      {{"dead", "requeue", "--config", path, "--all", "--type", "A"}, "needs exactly one of"},
      {{"dead", "requeue", "--config", path, "--id", "12;DROP"}, "--id '12;DROP' is neither a message id"},
      {{"dead", "requeue", "--id", "1"}, "dead requeue needs --config FILE"},
      {{"dead", "requeue", "--config", path, "--all", "--expect", "-1"}, "--expect must be a whole number from 0"},
  };
  for (const auto& c : cases) {
    auto r = run_relay_command(c.args);
    CHECK_MESSAGE(r.exit_code == 2, c.expected);
    CHECK_MESSAGE(contains(r.output, c.expected), r.output);
  }
  auto help = run_relay_command({"dead", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(contains(help.output,
                 "outbox-relay dead requeue --config FILE (--type T | --all) [--until TIME]\n"
                 "                                 (--dry-run | --expect N)"));
}

TEST_CASE("check-config takes one file and only --connect") {
  auto r = run_relay_command({"check-config", write_temp_file(kGood), "--fast"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "unknown argument '--fast' for check-config"));
}

TEST_CASE("a configuration error is one line even when the value at fault holds a line break") {
  auto r = check_config(kGood + "relay:\n  batch_size: \"12\\n13\"\n");
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "relay.batch_size: expected an integer, got '12\\n13'"), r.output);
}

TEST_CASE("admin commands exit 2 naming the argument they cannot use, before connecting") {
  // Unreachable servers: an argument that got past the checks would exit 1 instead.
  auto path = write_temp_file(
      "postgres:\n  dsn: host=127.0.0.1 port=1 user=postgres password=pg-secret-1 connect_timeout=2\n"
      "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:1/\n");
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  std::vector<Case> cases = {
      {{"replay", "--config", path, "--since", "2024-02-30T10:00:00Z"},
       "--since '2024-02-30T10:00:00Z' has day 30, which month 02 of 2024 does not have"},
      {{"replay", "--config", path, "--since", "2024-13-01"}, "--since '2024-13-01' has month 13"},
      {{"replay", "--config", path, "--since", "2024-05-01T25:00Z"}, "--since '2024-05-01T25:00Z' has hour 25"},
      {{"replay", "--config", path, "--since", "0000-01-01"}, "--since '0000-01-01' has year 0000"},
      {{"replay", "--config", path, "--since", "2024-05-01T10:00+99:00"}, "UTC offset"},
      {{"replay", "--config", path, "--since", "2024-05-01garbage"}, "--since '2024-05-01garbage' is not an RFC 3339"},
      {{"replay", "--config", path, "--since", "999999999d"},
       "--since '999999999d' is longer than the longest age, 3650d"},
      {{"replay", "--config", path, "--since", "12x"}, "--since '12x' is neither an RFC 3339 time"},
      {{"replay", "--config", path, "--id", "1", "--type", "Order\xff"}, "--type 'Order\\xff' is not valid UTF-8"},
      {{"cleanup", "--config", path, "--older-than", "999999999d"},
       "--older-than must be at most 3650d, got '999999999d'"},
      {{"cleanup", "--config", path, "--older-than", "3651d"}, "--older-than must be at most 3650d"},
      {{"cleanup", "--config", path, "--older-than", "7d", "--batch", "0"}, "--batch must be a whole number"},
      {{"dead", "list", "--config", path, "--type", "\xc3("}, "--type '\\xc3(' is not valid UTF-8"},
  };
  for (const auto& c : cases) {
    auto r = run_relay_command(c.args);
    CHECK_MESSAGE(r.exit_code == 2, c.expected);
    CHECK_MESSAGE(contains(r.output, c.expected), r.output);
    CHECK_FALSE(contains(r.output, "pg-secret-1"));
  }
}

TEST_CASE("check-config refuses a key given twice, so a second require_tls cannot be ignored") {
  auto r = check_config(
      "postgres:\n  dsn: host=127.0.0.1 user=postgres password=pg-secret-1\n"
      "  require_tls: false\n  require_tls: true\n"
      "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:5672/\n");
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, ":4: postgres.require_tls: given twice (first at line 3)"), r.output);
  CHECK_FALSE(contains(r.output, "pg-secret-1"));
}

TEST_CASE("every command's --help and -h exit 0 with its usage") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> commands = {
      {{"run"}, "outbox-relay run --config FILE"},
      {{"migrate"}, "outbox-relay migrate --config FILE"},
      {{"check-config"}, "outbox-relay check-config FILE"},
      {{"status"}, "status"},
      {{"replay"}, "replay"},
      {{"cleanup"}, "cleanup"},
      {{"dead"}, "outbox-relay dead requeue --config FILE"},
      {{"dead", "list"}, "outbox-relay dead requeue --config FILE"},
      {{"dead", "requeue"}, "outbox-relay dead requeue --config FILE"},
  };
  for (const auto& [command, expected] : commands) {
    for (const std::string flag : {"--help", "-h"}) {
      auto args = command;
      args.push_back(flag);
      const auto r = run_relay_command(args);
      CHECK_MESSAGE(r.exit_code == 0, std::string(command[0] + " " + flag + ": " + r.output));
      CHECK_MESSAGE(contains(r.output, expected), std::string(command[0] + " " + flag + ": " + r.output));
    }
  }
  // Also after other arguments, and with a configuration that does not exist.
  CHECK(run_relay_command({"run", "--config", "/nonexistent.yaml", "--help"}).exit_code == 0);
  CHECK(contains(run_relay_command({"migrate", "--help"}).output, "-c FILE and --config=FILE mean --config FILE"));
}

TEST_CASE("-c FILE and --config=FILE are --config FILE, for every command") {
  const auto good = write_temp_file(kGood);
  CHECK(run_relay_command({"check-config", "-c", good}).exit_code == 0);
  CHECK(run_relay_command({"check-config", "--config=" + good}).exit_code == 0);
  CHECK(contains(run_relay_command({"check-config", "--config", good}).output, ": valid"));
  // A bad file is read, and refused naming its key, whichever spelling named it.
  const auto bad = write_temp_file(kGood + "relay:\n  batch_size: 0\n");
  for (const std::string cmd : {"run", "migrate"}) {
    for (const auto& args :
         {std::vector<std::string>{cmd, "-c", bad}, std::vector<std::string>{cmd, "--config=" + bad}}) {
      const auto r = run_relay_command(args);
      CHECK_MESSAGE(r.exit_code == 2, r.output);
      CHECK_MESSAGE(contains(r.output, "relay.batch_size"), r.output);
    }
  }
  // Admin commands: past the arguments to the (unreachable) database, exit 1.
  const auto unreachable = write_temp_file(
      "postgres:\n  dsn: host=127.0.0.1 port=1 user=postgres password=pg-secret-1 connect_timeout=2\n"
      "amqp:\n  uri: amqp://guest:amqp-secret-2@127.0.0.1:1/\n");
  for (const auto& args : {std::vector<std::string>{"status", "-c", unreachable},
                           std::vector<std::string>{"status", "--config=" + unreachable, "--json"},
                           std::vector<std::string>{"cleanup", "-c", unreachable, "--older-than=7d"},
                           std::vector<std::string>{"dead", "list", "--config=" + unreachable, "--limit=5"}}) {
    const auto r = run_relay_command(args);
    CHECK_MESSAGE(r.exit_code == 1, std::string(args[0] + ": " + r.output));
    CHECK_FALSE(contains(r.output, "pg-secret-1"));
  }
}

TEST_CASE("unknown arguments still exit 2 naming the argument, in any spelling") {
  const auto good = write_temp_file(kGood);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "-c", good, "--fast"}, "unknown argument '--fast' for run"},
      {{"run", "--config=" + good, "--fast=yes"}, "unknown argument '--fast' for run"},
      {{"migrate", "-c", good, "-x"}, "unknown argument '-x' for migrate"},
      {{"check-config", "-c", good, "--fast"}, "unknown argument '--fast' for check-config"},
      {{"status", "-c", good, "--fast"}, "unknown argument '--fast' for status"},
      {{"run", "--config="}, "run needs --config FILE"},
      {{"run", "-c"}, "--config needs a file name"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_relay_command(args);
    CHECK_MESSAGE(r.exit_code == 2, expected);
    CHECK_MESSAGE(contains(r.output, expected), r.output);
  }
}

TEST_CASE("--config given twice is refused by every command, in any spelling, as other repeated flags are") {
  const auto a = write_temp_file(kGood), b = write_temp_file(kGood);
  for (const std::string cmd : {"run", "migrate", "status", "cleanup"}) {
    for (const auto& args : {std::vector<std::string>{cmd, "--config", a, "--config", b},
                             std::vector<std::string>{cmd, "-c", a, "--config=" + b}}) {
      const auto r = run_relay_command(args);
      CHECK_MESSAGE(r.exit_code == 2, std::string(cmd + ": " + r.output));
      CHECK_MESSAGE(contains(r.output, "--config given twice"), r.output);
    }
  }
  const auto dead = run_relay_command({"dead", "list", "-c", a, "-c", b});
  CHECK(dead.exit_code == 2);
  CHECK_MESSAGE(contains(dead.output, "--config given twice"), dead.output);
  CHECK(run_relay_command({"check-config", "--config", a, "--config", b}).exit_code == 2);
}

TEST_CASE(
    "an encrypted amqp.key_file fails check-config --connect at once, naming the file, without a passphrase prompt") {
  const auto dir = write_temp_file("", ".d");
  const auto key = dir + ".key.pem", cert = dir + ".crt.pem";
  // Encrypted with a passphrase (no -nodes).
  REQUIRE(std::system(("openssl req -x509 -newkey rsa:2048 -days 1 -subj /CN=relay -passout pass:TOPSECRETPASS"
                       " -keyout " +
                       key + " -out " + cert + " >/dev/null 2>&1")
                          .c_str()) == 0);
  auto path = write_temp_file(
      "postgres:\n  dsn: host=127.0.0.1 port=1 user=postgres\n  connect_timeout_s: 2\n"
      "amqp:\n  uri: amqps://guest:amqp-secret-2@127.0.0.1:1/\n  connect_timeout_ms: 2000\n"
      "  cert_file: " +
      cert + "\n  key_file: " + key + "\n");
  auto r = run_relay_command({"check-config", path, "--connect"});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "amqp: FAILED: amqp.key_file: '" + key +
                                       "' is encrypted; give an unencrypted key (passphrases are not supported)"),
                r.output);
  CHECK_FALSE(contains(r.output, "pass phrase"));
  std::remove(key.c_str());
  std::remove(cert.c_str());
}

TEST_CASE("check-config of /dev/zero exits 2 at once naming the path and its type, without reading it") {
  // Under a 1 GB address-space limit, so a relay that reads without a limit fails
  // (out of memory) instead of taking the machine's memory.
  auto r = testenv::run_command({"/bin/sh", "-c", "ulimit -v 1000000; exec \"$0\" check-config /dev/zero",
                                 OUTBOX_RELAY_BIN});
  CHECK_MESSAGE(r.exit_code == 2, r.output);
  CHECK_MESSAGE(contains(r.output,
                         "/dev/zero: cannot read the configuration file: it is a character device, not a "
                         "regular file"),
                r.output);
}
