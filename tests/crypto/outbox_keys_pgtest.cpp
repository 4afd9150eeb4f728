// outbox-keys, the operator's tool for master-key rotation, run as a command against
// the real PostgreSQL: what it prints, what it changes, and its exit codes.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <thread>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/subject_key_store.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using cryptotest::contains;
using testenv::ScopedSchema;
using testenv::sql_value;

namespace {

testenv::CommandResult keys_tool(std::vector<std::string> args) {
  args.insert(args.begin(), OUTBOX_KEYS_BIN);
  return testenv::run_command(args);
}

// A keyring file as an operator keeps it: mode 0600.
std::string keyring_file(const cryptotest::KeyTexts& keys, const std::string& active) {
  const auto path = testenv::write_temp_file(cryptotest::keyring_yaml(keys, active));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  return path;
}

// Subject keys for `subjects`, wrapped by `ring`'s active key.
void make_subject_keys(const ScopedSchema& schema, const std::shared_ptr<const Keyring>& ring, int subjects,
                       const std::string& prefix = "cust-") {
  std::vector<std::string> names;
  for (int i = 0; i < subjects; ++i) names.push_back(prefix + std::to_string(i));
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  SubjectKeyStore(schema.name(), ring).acquire(tx, names);
  tx.commit();
}

std::string wrapping_counts(const ScopedSchema& schema) {
  return sql_value(
      "SELECT string_agg(wrapping_key_id || '=' || n, ',' ORDER BY wrapping_key_id) FROM (SELECT "
      "wrapping_key_id, count(*) n FROM \"" +
      schema.name() + "\".outbox_subject_keys GROUP BY 1) c");
}

}  // namespace

TEST_CASE("check prints the key ids of a keyring and never a byte of a key") {
  const auto keys = cryptotest::key_texts({"k1", "k2"});
  const auto r = keys_tool({"check", "--keyring", keyring_file(keys, "k2")});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "active key: 'k2'"));
  CHECK(contains(r.output, "keys: 'k1' 'k2'"));
  for (const auto& [id, text] : keys) CHECK_FALSE(contains(r.output, text.substr(0, 8)));
}

TEST_CASE("check refuses a keyring file others can read, and a bad key, naming the file and key id, not the key") {
  auto keys = cryptotest::key_texts({"k1"});
  const auto open_file = testenv::write_temp_file(cryptotest::keyring_yaml(keys, "k1"));
  REQUIRE(::chmod(open_file.c_str(), 0644) == 0);
  auto r = keys_tool({"check", "--keyring", open_file});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "chmod 600"), r.output);
  CHECK_FALSE(contains(r.output, keys["k1"].substr(0, 8)));
  keys["k1"] = keys["k1"].substr(0, 40);  // 30 bytes, not 32
  r = keys_tool({"check", "--keyring", keyring_file(keys, "k1")});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "key 'k1'"), r.output);
  CHECK_FALSE(contains(r.output, keys["k1"].substr(0, 8)));
}

TEST_CASE("check refuses a FIFO, a directory or a device as --keyring at once, by type, naming the option and path") {
  const std::string fifo = "/tmp/outbox_keys_pgtest_fifo_" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Under `timeout`: a tool that blocks in open() on the FIFO (no writer ever comes)
  // is killed after 20 s and fails here, instead of hanging the test run.
  for (const auto& [path, type] : {std::pair<std::string, std::string>{fifo, "a FIFO"},
                                   {"/tmp", "a directory"},
                                   {"/dev/zero", "a character device"}}) {
    const auto started = std::chrono::steady_clock::now();
    const auto r = testenv::run_command({"/usr/bin/timeout", "-s", "KILL", "20", OUTBOX_KEYS_BIN, "check", "--keyring",
                                         path});
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    CHECK_MESSAGE(r.exit_code == 1, r.output);
    CHECK_MESSAGE(contains(r.output, "--keyring: keyring " + path + ": it is " + type + ", not a regular file"),
                  r.output);
  }
  std::remove(fifo.c_str());
}

TEST_CASE("a wrong command line exits 2 naming the option, and changes nothing") {
  ScopedSchema schema("keys");
  auto keys = cryptotest::key_texts({"k1", "k2"});
  make_subject_keys(schema, cryptotest::keyring({{"k1", keys["k1"]}}, "k1"), 2);
  auto r = keys_tool({"check"});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "--keyring"), r.output);
  const auto file = keyring_file(keys, "k2");  // would rewrap them all
  r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file, "--batch", "0"});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "--batch"), r.output);
  r = keys_tool({"rewrap", "--keyring", file});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "--schema"), r.output);
  r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file, "--keyring-env", "X"});
  CHECK(r.exit_code == 2);
  r = keys_tool({"rotate", "--schema", schema.name()});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "unknown command 'rotate'"), r.output);
  CHECK(wrapping_counts(schema) == "k1=2");
}

TEST_CASE("rewrap moves every subject key to the active master key in committed batches, with progress") {
  ScopedSchema schema("keys");
  auto keys = cryptotest::key_texts({"k1", "k2"});
  make_subject_keys(schema, cryptotest::keyring({{"k1", keys["k1"]}}, "k1"), 5);
  const auto file = keyring_file(keys, "k2");
  auto r = keys_tool({"status", "--schema", schema.name(), "--keyring", file});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "'k1': 5 (in the keyring, not active: rewrap them)"));
  CHECK(contains(r.output, "5 to rewrap, 0 wrapped by keys missing from the keyring"));
  r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file, "--batch", "2"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "rewrapped 2 subject keys (2 so far)"));
  CHECK(contains(r.output, "rewrapped 1 subject keys (5 so far)"));
  CHECK(contains(r.output, "rewrapped 5 subject keys under the active key 'k2'"));
  CHECK(wrapping_counts(schema) == "k2=5");
  // The old key can retire: a keyring of k2 alone unwraps every subject key.
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::read_transaction tx(conn);
  const SubjectKeyStore only_new(schema.name(), cryptotest::keyring({{"k2", keys["k2"]}}, "k2"));
  for (const auto& row : tx.exec("SELECT key_id FROM \"" + schema.name() + "\".outbox_subject_keys"))
    CHECK_NOTHROW(only_new.fetch(tx, row[0].as<std::string>()));
  r = keys_tool({"status", "--schema", schema.name(), "--keyring", file});
  CHECK(contains(r.output, "every subject key is wrapped by the active key"));
}

TEST_CASE("rewrap with keys of a master key missing from the keyring moves the rest and exits 3 naming that key") {
  ScopedSchema schema("keys");
  auto keys = cryptotest::key_texts({"k0", "k1", "k2"});
  make_subject_keys(schema, cryptotest::keyring({{"k0", keys["k0"]}}, "k0"), 1);
  make_subject_keys(schema, cryptotest::keyring({{"k1", keys["k1"]}}, "k1"), 3, "other-");
  const auto file = keyring_file({{"k1", keys["k1"]}, {"k2", keys["k2"]}}, "k2");
  const auto r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file});
  CHECK(r.exit_code == 3);
  CHECK_MESSAGE(contains(r.output, "'k0' (1); add those keys to the keyring"), r.output);
  CHECK(wrapping_counts(schema) == "k0=1,k2=3");
}

TEST_CASE("status, check and rewrap fail naming the id when the keyring keeps a key id with other key bytes") {
  ScopedSchema schema("keys");
  const auto real = cryptotest::key_texts({"k2"});
  make_subject_keys(schema, cryptotest::keyring(real, "k2"), 40);
  auto reused = cryptotest::key_texts({"k2", "k3"});  // 'k2' kept as an id, with new bytes
  const auto file = keyring_file({{"k2", reused["k2"]}}, "k2");
  auto no_key_bytes = [&](const std::string& output) {
    for (const auto& text : {real.at("k2"), reused.at("k2"), reused.at("k3")})
      CHECK(testenv::leaked_fragment(output, cryptotest::unbase64(text)).empty());
    CHECK_FALSE(contains(output, reused.at("k2").substr(0, 8)));
    CHECK_FALSE(contains(output, real.at("k2").substr(0, 8)));
  };
  auto r = keys_tool({"status", "--schema", schema.name(), "--keyring", file});
  CHECK_MESSAGE(r.exit_code == 1, r.output);
  CHECK_MESSAGE(contains(r.output, "the keyring's key 'k2' unwraps none of the 8 sampled subject keys"), r.output);
  CHECK_FALSE(contains(r.output, "every subject key is wrapped by the active key"));
  no_key_bytes(r.output);
  r = keys_tool({"check", "--keyring", file, "--schema", schema.name()});
  CHECK_MESSAGE(r.exit_code == 1, r.output);
  CHECK_MESSAGE(contains(r.output, "'k2': 0 of 8 sampled keys unwrap"), r.output);
  no_key_bytes(r.output);
  // A rotation to k3 with that keyring is refused before it changes anything.
  const auto rotated = keyring_file(reused, "k3");
  r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", rotated});
  CHECK_MESSAGE(r.exit_code == 1, r.output);
  CHECK_MESSAGE(contains(r.output, "rewrap refused: nothing was changed"), r.output);
  no_key_bytes(r.output);
  CHECK(wrapping_counts(schema) == "k2=40");
  // The right key: all three pass.
  const auto right = keyring_file(real, "k2");
  r = keys_tool({"status", "--schema", schema.name(), "--keyring", right});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK_MESSAGE(contains(r.output, "'k2': 8 of 8 sampled keys unwrap"), r.output);
  CHECK(contains(r.output, "every subject key is wrapped by the active key"));
  r = keys_tool({"check", "--keyring", right, "--schema", schema.name()});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
}

TEST_CASE("the connection string comes from the environment, and a wrong one is an error without its password") {
  ScopedSchema schema("keys");
  const auto file = keyring_file(cryptotest::key_texts({"k1"}), "k1");
  auto r = keys_tool({"status", "--schema", schema.name(), "--dsn-env", "OUTBOX_KEYS_TEST_UNSET"});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "'OUTBOX_KEYS_TEST_UNSET' is not set"), r.output);
  const std::string password = "S3cr3t:p@ss'w\"ord";
  const auto dsn = testenv::pg_dsn() + " user=nobody_here password='" +
                   std::regex_replace(password, std::regex("'"), "\\'") + "'";
  REQUIRE(::setenv("OUTBOX_KEYS_TEST_DSN", dsn.c_str(), 1) == 0);
  r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file, "--dsn-env", "OUTBOX_KEYS_TEST_DSN"});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "nobody_here"), r.output);  // libpq's error, scrubbed
  CHECK_FALSE(contains(r.output, "S3cr"));
  r = keys_tool({"status", "--schema", "no_such_schema_here", "--keyring", file});
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "migrate"), r.output);
}

TEST_CASE("rewrap stops between batches on SIGTERM: every key moved or untouched, and a second run finishes") {
  ScopedSchema schema("keys");
  auto keys = cryptotest::key_texts({"k1", "k2"});
  constexpr int kKeys = 5000;
  make_subject_keys(schema, cryptotest::keyring({{"k1", keys["k1"]}}, "k1"), kKeys);
  const auto file = keyring_file(keys, "k2");
  const auto out_path = testenv::write_temp_file("", ".out");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = {OUTBOX_KEYS_BIN, "rewrap", "--schema", schema.name(),
                                   "--keyring",     file,     "--batch",  "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  auto output = [&] {
    std::ifstream in(out_path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  REQUIRE(testenv::eventually(std::chrono::seconds(10), [&] { return contains(output(), "(20 so far)"); }));
  ::kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_MESSAGE(contains(output(), "interrupted after rewrapping"), output());
  const auto moved = std::stoi(sql_value("SELECT count(*) FROM \"" + schema.name() +
                                         "\".outbox_subject_keys WHERE wrapping_key_id = 'k2'"));
  CHECK(moved >= 20);
  CHECK(moved < kKeys);
  const auto r = keys_tool({"rewrap", "--schema", schema.name(), "--keyring", file, "--batch", "1000"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(wrapping_counts(schema) == "k2=" + std::to_string(kKeys));
}

TEST_CASE("erase destroys one subject's key without a keyring, leaves the others, and says so") {
  ScopedSchema schema("keys");
  auto keys = cryptotest::key_texts({"k1"});
  const auto ring = cryptotest::keyring(keys, "k1");
  make_subject_keys(schema, ring, 2);  // cust-0, cust-1
  const auto table = "\"" + schema.name() + "\".outbox_subject_keys";
  const auto cust0_key = sql_value("SELECT key_id FROM " + table + " WHERE subject = 'cust-0'");
  auto r = keys_tool({"erase", "--schema", schema.name(), "--subject", "cust-0"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "subject 'cust-0': data key destroyed"));
  CHECK(contains(r.output, "VACUUM"));
  CHECK(sql_value("SELECT wrapped_key IS NULL AND erased_at IS NOT NULL FROM " + table + " WHERE subject = 'cust-0'") ==
        "t");
  CHECK(sql_value("SELECT wrapped_key IS NOT NULL AND erased_at IS NULL FROM " + table + " WHERE subject = 'cust-1'") ==
        "t");
  {  // No keyring can open cust-0's fields any more.
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::read_transaction tx(conn);
    CHECK_THROWS_AS(SubjectKeyStore(schema.name(), ring).fetch(tx, cust0_key), SubjectErasedError);
  }
  r = keys_tool({"erase", "--schema", schema.name(), "--subject", "cust-0"});  // again
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "had no data key, or was erased before"));
  r = keys_tool({"erase", "--schema", schema.name(), "--subject", "never-seen\n\x1b[2J"});  // a tombstone first
  CHECK(r.exit_code == 0);
  CHECK_MESSAGE(contains(r.output, "'never-seen\\n\\x1b[2J'"), r.output);  // escaped, not acted on
  CHECK(sql_value("SELECT count(*) FROM " + table + " WHERE erased_at IS NOT NULL") == "2");
  r = keys_tool({"erase", "--schema", schema.name(), "--subject", ""});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, "--subject"), r.output);
  r = keys_tool({"erase", "--schema", schema.name()});
  CHECK(r.exit_code == 2);
}
