// Hostile producer logins against the subject keys of field encryption (issue 40,
// finding 1): real logins in the producer role made by schema/roles.sql, against the
// real PostgreSQL.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <pqxx/pqxx>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/subject_key_store.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::contains;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

// The producer group role of roles.sql and two logins in it: a service doing its job
// and a hostile (or broken) one. Dropped on destruction.
class ProducerLogins {
 public:
  explicit ProducerLogins(const ScopedSchema& schema)
      : group_(testenv::unique_name("producer_role")), honest_(group_ + "_honest"), evil_(group_ + "_evil") {
    const auto relay = group_ + "_relay";
    const std::string cmd = "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + schema.name() +
                            " -v relay_role=" + relay + " -v producer_role=" + group_ + " -f " + OUTBOX_ROLES_SQL +
                            " >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    roles_ = {honest_, evil_, group_, relay};
    sql_exec("CREATE ROLE " + honest_ + " LOGIN IN ROLE " + group_);
    sql_exec("CREATE ROLE " + evil_ + " LOGIN IN ROLE " + group_);
  }
  ~ProducerLogins() {
    for (const auto& r : roles_) {
      try {
        sql_exec("DROP OWNED BY " + r);
        sql_exec("DROP ROLE " + r);
      } catch (...) {
      }
    }
  }
  std::string honest_dsn() const { return testenv::pg_dsn() + " user=" + honest_; }
  std::string evil_dsn() const { return testenv::pg_dsn() + " user=" + evil_; }
  const std::string& honest() const { return honest_; }
  const std::string& evil() const { return evil_; }

 private:
  std::string group_, honest_, evil_;
  std::vector<std::string> roles_;
};

std::string keys_table(const ScopedSchema& schema) { return "\"" + schema.name() + "\".outbox_subject_keys"; }

// 60 bytes (a wrapped key's length) that are no wrapped key, as a bytea literal.
const char* kGarbage =
    "'\\x"
    "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
    "2122232425262728292a2b2c2d2e2f303132333435363738393a3b3c'::bytea";

void run_as(const std::string& dsn, const std::string& sql) {
  pqxx::connection conn(dsn);
  pqxx::work tx(conn);
  tx.exec(sql);
  tx.commit();
}

std::map<std::string, SubjectKeyStore::DataKey> acquire_as(const std::string& dsn, const SubjectKeyStore& store,
                                                           const std::vector<std::string>& subjects) {
  pqxx::connection conn(dsn);
  pqxx::work tx(conn);
  auto keys = store.acquire(tx, subjects);
  tx.commit();
  return keys;
}

bool same_key(const SubjectKeyStore::DataKey& a, const SubjectKeyStore::DataKey& b) {
  return a.key_id == b.key_id && std::equal(a.key.data(), a.key.data() + SecretKey::kBytes, b.key.data());
}

SubjectKeyStore::DataKey fetch(const SubjectKeyStore& store, const std::string& key_id) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::read_transaction tx(conn);
  return store.fetch(tx, key_id);
}

}  // namespace

TEST_CASE("a key row another producer login planted is superseded and kept; the subject's events go on") {
  ScopedSchema schema("poison");
  ProducerLogins logins(schema);
  const auto keys = keys_table(schema);
  const SubjectKeyStore store(schema.name(), cryptotest::keyring(cryptotest::key_texts({"k3"}), "k3"));
  const auto first = acquire_as(logins.honest_dsn(), store, {"customer-1"});

  // The hostile login pre-empts customer-3 with garbage under the real key id.
  run_as(logins.evil_dsn(), "INSERT INTO " + keys +
                                " (subject, key_id, wrapping_key_id, wrapped_key) VALUES ('customer-3', 'sk_evil3', "
                                "'k3', " +
                                kGarbage + ")");
  CHECK(sql_value("SELECT created_by FROM " + keys + " WHERE subject = 'customer-3'") == logins.evil());

  // The honest producer's business transaction does not abort: customer-3 gets a key
  // it can use, customer-1 keeps its own.
  const auto got = acquire_as(logins.honest_dsn(), store, {"customer-1", "customer-3"});
  REQUIRE(got.size() == 2);
  CHECK(same_key(got.at("customer-1"), first.at("customer-1")));
  CHECK(got.at("customer-3").key_id != "sk_evil3");
  CHECK(same_key(fetch(store, got.at("customer-3").key_id), got.at("customer-3")));
  CHECK(sql_value("SELECT created_by FROM " + keys + " WHERE subject = 'customer-3'") == logins.honest());
  CHECK(sql_value("SELECT created_by || '/' || superseded_by FROM " + keys + "_superseded WHERE key_id = 'sk_evil3'") ==
        logins.evil() + "/" + logins.honest());

  // Superseding a sound key (the function allows it: the server cannot tell) breaks
  // nothing either: the old key is kept and still decrypts, the next event gets a
  // fresh one.
  run_as(logins.evil_dsn(), "SELECT \"" + schema.name() + "\".supersede_subject_key('customer-1', '" +
                                first.at("customer-1").key_id + "', 'sk_evil1', 'k3', " + kGarbage + ")");
  const auto after = acquire_as(logins.honest_dsn(), store, {"customer-1"});
  CHECK(after.at("customer-1").key_id != "sk_evil1");
  CHECK(after.at("customer-1").key_id != first.at("customer-1").key_id);
  CHECK(same_key(fetch(store, first.at("customer-1").key_id), first.at("customer-1")));

  // What the hostile login cannot do: forge who created a key, or touch the kept ones.
  pqxx::connection evil(logins.evil_dsn());
  auto refused = [&](const std::string& sql) {
    pqxx::work tx(evil);
    try {
      tx.exec(sql);
    } catch (const pqxx::insufficient_privilege&) {
      return true;
    }
    return false;
  };
  CHECK(refused("INSERT INTO " + keys +
                " (subject, key_id, wrapping_key_id, wrapped_key, created_by) VALUES ('customer-9', 'sk_9', 'k3', " +
                kGarbage + ", '" + logins.honest() + "')"));
  CHECK(refused("UPDATE " + keys + "_superseded SET wrapped_key = NULL"));
  CHECK(refused("DELETE FROM " + keys + "_superseded"));
  CHECK(refused("UPDATE " + keys + " SET created_by = 'x'"));
}

TEST_CASE("a producer at fault itself gets a typed error: its own bad row, or a keyring with other bytes for an id") {
  ScopedSchema schema("poison");
  ProducerLogins logins(schema);
  const auto keys = keys_table(schema);
  const auto texts = cryptotest::key_texts({"k3"});
  const SubjectKeyStore store(schema.name(), cryptotest::keyring(texts, "k3"));
  acquire_as(logins.honest_dsn(), store, {"customer-1", "customer-2", "customer-3"});

  // Its own row broken (here by hand): a DecryptionError naming the master key, and
  // the row is left for the operator, not replaced.
  sql_exec("UPDATE " + keys + " SET wrapped_key = " + kGarbage + " WHERE subject = 'customer-2'");
  try {
    acquire_as(logins.honest_dsn(), store, {"customer-2"});
    FAIL("a broken row of the producer's own was used or replaced");
  } catch (const KeyringMismatchError& e) {
    FAIL(e.what());
  } catch (const DecryptionError& e) {
    CHECK_MESSAGE(contains(e.what(), "does not verify under master key 'k3'"), e.what());
  }

  // Another service that wrote keys under 'k3', then was given a keyring that keeps
  // the id 'k3' with other bytes: it would replace every subject's key with keys
  // nobody can read. Its own older keys witness that its keyring changed: refused.
  acquire_as(logins.evil_dsn(), store, {"customer-4"});
  const SubjectKeyStore wrong(schema.name(), cryptotest::keyring(cryptotest::key_texts({"k3"}), "k3"));
  try {
    acquire_as(logins.evil_dsn(), wrong, {"customer-1"});
    FAIL("a keyring with other bytes for 'k3' superseded a sound key");
  } catch (const KeyringMismatchError& e) {
    CHECK_MESSAGE(contains(e.what(), "'k3'"), e.what());
  }
  CHECK(sql_value("SELECT count(*) FROM " + keys + "_superseded") == "0");
}

TEST_CASE("rewrap skips and names a key row that does not verify, moves every other key, and exits 3 at the end") {
  ScopedSchema schema("poison");
  ProducerLogins logins(schema);
  const auto keys = keys_table(schema);
  auto texts = cryptotest::key_texts({"k3", "k4"});
  const SubjectKeyStore old_store(schema.name(), cryptotest::keyring({{"k3", texts["k3"]}}, "k3"));
  std::vector<std::string> subjects;
  for (int i = 0; i < 1200; ++i) subjects.push_back("cust-" + std::to_string(i));
  acquire_as(logins.honest_dsn(), old_store, subjects);
  // Sorted among the others by key id, so batches meet it first ('sk_0...').
  run_as(logins.evil_dsn(), "INSERT INTO " + keys +
                                " (subject, key_id, wrapping_key_id, wrapped_key) VALUES ('customer-3', 'sk_0', "
                                "'k3', " +
                                kGarbage + ")");
  const auto file = testenv::write_temp_file(cryptotest::keyring_yaml(texts, "k4"));
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  const auto r = testenv::run_command({OUTBOX_KEYS_BIN, "rewrap", "--schema", schema.name(), "--keyring", file,
                                       "--batch", "500"});
  CHECK_MESSAGE(r.exit_code == 3, r.output);
  CHECK_MESSAGE(contains(r.output, "rewrapped 1200 subject keys under the active key 'k4'"), r.output);
  CHECK_MESSAGE(contains(r.output, "subject 'customer-3' (key 'sk_0', master key 'k3', created by login '" +
                                       logins.evil() + "')"),
                r.output);
  CHECK(sql_value("SELECT count(*) FROM " + keys + " WHERE wrapping_key_id = 'k4'") == "1200");
  CHECK(sql_value("SELECT wrapping_key_id FROM " + keys + " WHERE subject = 'customer-3'") == "k3");
  for (const auto& text : texts) CHECK_FALSE(contains(r.output, text.second.substr(0, 8)));
}
