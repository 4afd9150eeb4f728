// schema/roles.sql: the relay runs under its least-privilege role, the producer
// role can only insert, and a missing privilege stops the relay at start with a
// message naming it. Column privileges: the relay may set only its state columns,
// the producer may insert only its own columns (a stolen credential of either cannot
// rewrite a pending row or insert one already published).
#include <doctest/doctest.h>

#include <map>
#include <pqxx/pqxx>
#include <set>

#include "../crypto/crypto_test_support.h"
#include "outbox/outbox_writer.h"
#include "outbox/subject_key_store.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::run_relay_command;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

using testenv::contains;

// Group roles made by schema/roles.sql (run with psql, as an operator would) and
// one login role in each; all dropped on destruction.
class ScopedRoles {
 public:
  ScopedRoles(const ScopedSchema& schema, bool retention)
      : schema_(schema.name()),
        relay_(testenv::unique_name("relay_role")),
        producer_(testenv::unique_name("producer_role")),
        relay_login_(relay_ + "_login"),
        producer_login_(producer_ + "_login") {
    run_roles_sql(retention);
    sql_exec("CREATE ROLE " + relay_login_ + " LOGIN IN ROLE " + relay_);
    sql_exec("CREATE ROLE " + producer_login_ + " LOGIN IN ROLE " + producer_);
  }
  // schema/roles.sql as an operator runs it: again on an existing database too.
  void run_roles_sql(bool retention) const {
    const std::string cmd = "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + schema_ +
                            " -v relay_role=" + relay_ + " -v producer_role=" + producer_ +
                            (retention ? " -v retention=true" : "") + " -f " + OUTBOX_ROLES_SQL + " >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  ~ScopedRoles() {
    for (const auto& r : {relay_login_, producer_login_, relay_, producer_}) {
      try {
        sql_exec("DROP OWNED BY " + r);
        sql_exec("DROP ROLE " + r);
      } catch (...) {
      }
    }
  }
  const std::string& relay() const { return relay_; }
  const std::string& producer() const { return producer_; }
  std::string relay_dsn() const { return testenv::pg_dsn() + " user=" + relay_login_; }
  std::string producer_dsn() const { return testenv::pg_dsn() + " user=" + producer_login_; }
  const std::string& relay_login() const { return relay_login_; }

 private:
  std::string schema_, relay_, producer_, relay_login_, producer_login_;
};

// `extra`: whole sections appended; `extra_relay`: lines inside relay:.
std::string relay_yaml(const ScopedSchema& schema, const ScopedRoles& roles, const std::string& extra = "",
                       const std::string& extra_relay = "") {
  auto yaml = testenv::relay_config_yaml(schema.name(), extra_relay) + extra;
  const std::string from = "dsn: ${OUTBOX_PG_DSN}";
  yaml.replace(yaml.find(from), from.size(), "dsn: " + roles.relay_dsn());
  return yaml;
}

Message event(const TestBroker& broker, int i) {
  Message m;
  m.exchange = Exchange(broker.exchange());
  m.routing_key = RoutingKey(broker.routing_key());
  m.type = MessageType("OrderPlaced");
  m.payload = R"({"i":)" + std::to_string(i) + "}";
  return m;
}

// Runs `sql` as `dsn` (and rolls back); true when the server refuses it for lack of
// privilege: libpqxx throws insufficient_privilege for SQLSTATE 42501 exactly (its
// sqlstate() is empty in 6.4). Any other error propagates and fails the test: a
// statement refused for another reason would prove nothing about the grants.
bool refused(const std::string& dsn, const std::string& sql) {
  pqxx::connection conn(dsn);
  pqxx::work tx(conn);
  try {
    tx.exec(sql);
  } catch (const pqxx::insufficient_privilege&) {
    return true;
  }
  return false;
}

const std::vector<std::string> kRelayStateColumns = {"attempts = attempts + 1", "next_attempt_at = now()",
                                                     "last_error = 'x'",        "refused_by_broker = true",
                                                     "published_at = now()",    "parked_at = now()"};
// Everything else: the producer's event, and the row's identity and creation time.
const std::vector<std::string> kEventColumns = {"payload = 'evil'",
                                                "exchange = 'evil'",
                                                "routing_key = 'evil'",
                                                "headers = '{\"x\":\"y\"}'",
                                                "message_id = gen_random_uuid()",
                                                "message_type = 'Evil'",
                                                "ordering_key = 'evil'",
                                                "key_seq = 1",
                                                "content_type = 'text/evil'",
                                                "correlation_id = 'evil'",
                                                "created_at = now()"};

// A producer's INSERT with the producer's columns plus `column` = `value`.
std::string insert_with(const std::string& table, const std::string& column, const std::string& value) {
  return "INSERT INTO " + table + " (message_id, exchange, routing_key, message_type, payload" +
         (column.empty() ? "" : ", " + column) + ") VALUES (gen_random_uuid(), 'ex', 'rk', 'T', 'x'" +
         (value.empty() ? "" : ", " + value) + ")";
}

std::string config_file(const ScopedSchema& schema, const ScopedRoles& roles) {
  return testenv::write_temp_file(relay_yaml(schema, roles));
}

}  // namespace

TEST_CASE("under the least-privilege roles a producer enqueues and the relay publishes") {
  ScopedSchema schema;
  TestBroker broker;
  ScopedRoles roles(schema, /*retention=*/false);
  {
    pqxx::connection conn(roles.producer_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    for (int i = 0; i < 5; ++i) {
      auto m = event(broker, i);
      m.ordering_key = "order-" + std::to_string(i % 2);
      writer.enqueue(tx, m);
    }
    tx.commit();
  }
  // Both claims lock rows FOR UPDATE: the column grant must be enough for each.
  std::string ordering;
  SUBCASE("unordered") {}
  SUBCASE("per_key lanes") { ordering = "  ordering: per_key\n  lanes: 4\n"; }
  RelayProcess relay(relay_yaml(schema, roles, "", ordering), /*exit_when_idle=*/true);
  int code = relay.wait();
  if (code != 0) MESSAGE(relay.log());
  CHECK(code == 0);
  // The key sequence's trigger numbers the producer's rows though its role has no
  // privilege on the counters (SECURITY DEFINER).
  std::map<std::string, std::set<std::string>> seqs;
  for (const auto& m : broker.receive(5, std::chrono::milliseconds(1500)))
    seqs[m.headers.at("x-outbox-key")].insert(m.headers.at("x-outbox-seq"));
  CHECK(seqs["order-0"] == std::set<std::string>{"1", "2", "3"});
  CHECK(seqs["order-1"] == std::set<std::string>{"1", "2"});
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL") == "5");
}

TEST_CASE("the producer role can only insert; the relay role cannot insert, delete or change the schema") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/false);
  const std::string t = "\"" + schema.name() + "\".outbox";
  sql_exec("INSERT INTO " + t +
           " (message_id, exchange, routing_key, message_type, payload) "
           "VALUES (gen_random_uuid(), 'ex', 'rk', 'T', 'x')");
  CHECK(refused(roles.producer_dsn(), "SELECT count(*) FROM " + t));
  CHECK(refused(roles.producer_dsn(), "UPDATE " + t + " SET attempts = 1"));
  CHECK(refused(roles.producer_dsn(), "DELETE FROM " + t));
  CHECK(refused(roles.relay_dsn(), "INSERT INTO " + t +
                                       " (message_id, exchange, routing_key, message_type, "
                                       "payload) VALUES (gen_random_uuid(), 'ex', 'rk', 'T', 'x')"));
  CHECK(refused(roles.relay_dsn(), "DELETE FROM " + t));
  CHECK(refused(roles.relay_dsn(), "CREATE TABLE \"" + schema.name() + "\".evil (id int)"));
  CHECK(refused(roles.relay_dsn(), "ALTER TABLE " + t + " ADD COLUMN evil int"));
  CHECK_FALSE(refused(roles.relay_dsn(), "SELECT id FROM " + t + " FOR UPDATE SKIP LOCKED"));
}

TEST_CASE("a relay whose role lacks a privilege fails at start with exit 1, naming the privilege") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/false);
  const std::string t = "\"" + schema.name() + "\".outbox";

  SUBCASE("UPDATE (claiming FOR UPDATE needs it)") {
    sql_exec("REVOKE UPDATE ON " + t + " FROM " + roles.relay());
    RelayProcess relay(relay_yaml(schema, roles), true);
    CHECK(relay.wait() == 1);
    CHECK(contains(relay.log(), "PostgreSQL role '" + roles.relay_login() + "' lacks UPDATE on " + t));
  }
  SUBCASE("UPDATE of one state column (parking a row needs it)") {
    sql_exec("REVOKE UPDATE (parked_at) ON " + t + " FROM " + roles.relay());
    RelayProcess relay(relay_yaml(schema, roles), true);
    CHECK(relay.wait() == 1);
    CHECK(contains(relay.log(), "lacks UPDATE on " + t + " of column(s) parked_at ("));
  }
  SUBCASE("DELETE, when retention is enabled") {
    RelayProcess relay(relay_yaml(schema, roles, "retention:\n  enabled: true\n"), true);
    CHECK(relay.wait() == 1);
    CHECK(contains(relay.log(), "lacks DELETE on " + t + " (retention deletes old published rows)"));
  }
  SUBCASE("USAGE on the schema") {
    sql_exec("REVOKE USAGE ON SCHEMA \"" + schema.name() + "\" FROM " + roles.relay());
    RelayProcess relay(relay_yaml(schema, roles), true);
    CHECK(relay.wait() == 1);
    CHECK(contains(relay.log(), "lacks USAGE on schema \"" + schema.name() + "\""));
  }
}

TEST_CASE("with -v retention=true the relay role may run retention") {
  ScopedSchema schema;
  TestBroker broker;
  ScopedRoles roles(schema, /*retention=*/true);
  RelayProcess relay(relay_yaml(schema, roles, "retention:\n  enabled: true\n"), true);
  int code = relay.wait();
  if (code != 0) MESSAGE(relay.log());
  CHECK(code == 0);
}

TEST_CASE("the relay role may update only the relay's state columns, never a row's event") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/true);
  const std::string t = "\"" + schema.name() + "\".outbox";
  sql_exec(insert_with(t, "", ""));
  for (const auto& set : kEventColumns) {
    INFO(set);
    CHECK(refused(roles.relay_dsn(), "UPDATE " + t + " SET " + set));
  }
  for (const auto& set : kRelayStateColumns) {
    INFO(set);
    CHECK_FALSE(refused(roles.relay_dsn(), "UPDATE " + t + " SET " + set));
  }
}

TEST_CASE("the producer role may insert only the producer's columns, not the relay's state") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/false);
  const std::string t = "\"" + schema.name() + "\".outbox";
  const std::vector<std::pair<std::string, std::string>> forbidden = {{"published_at", "now()"},
                                                                      {"parked_at", "now()"},
                                                                      {"attempts", "99"},
                                                                      {"last_error", "'x'"},
                                                                      {"refused_by_broker", "true"},
                                                                      {"next_attempt_at", "now() + interval '1 year'"},
                                                                      {"created_at", "now() - interval '1 year'"}};
  for (const auto& [column, value] : forbidden) {
    INFO(column);
    CHECK(refused(roles.producer_dsn(), insert_with(t, column, value)));
  }
  CHECK(refused(roles.producer_dsn(), "INSERT INTO " + t +
                                          " (id, message_id, exchange, routing_key, "
                                          "message_type, payload) OVERRIDING SYSTEM VALUE VALUES (-1, "
                                          "gen_random_uuid(), 'ex', 'rk', 'T', 'x')"));
  CHECK(refused(roles.producer_dsn(), "DELETE FROM " + t));
  CHECK(refused(roles.producer_dsn(), "UPDATE " + t + " SET published_at = now()"));
  CHECK(refused(roles.producer_dsn(), "SELECT payload FROM " + t));
  // The key sequence (migration 0016) is the trigger's alone.
  CHECK(refused(roles.producer_dsn(), insert_with(t, "key_seq", "7")));
  // The relay may read them (sequence-audit), the producer not even that.
  CHECK(refused(roles.producer_dsn(), "SELECT * FROM \"" + schema.name() + "\".outbox_key_sequences"));
  CHECK_FALSE(refused(roles.relay_dsn(), "SELECT * FROM \"" + schema.name() + "\".outbox_key_sequences"));
  for (const auto& dsn : {roles.producer_dsn(), roles.relay_dsn()}) {
    CHECK(refused(dsn, "UPDATE \"" + schema.name() + "\".outbox_key_sequences SET last_seq = 1"));
    CHECK(refused(dsn, "DELETE FROM \"" + schema.name() + "\".outbox_key_sequences"));
  }
  // Every column the SDK writes is the producer's, deliver_at (migration 0018) too,
  // and enqueue() with it.
  CHECK_FALSE(refused(roles.producer_dsn(), insert_with(t, "ordering_key, content_type, headers, correlation_id",
                                                        "'k', 'application/json', '{\"h\":\"v\"}', 'c'")));
  CHECK_FALSE(refused(roles.producer_dsn(), insert_with(t, "deliver_at", "now() + interval '1 hour'")));
  CHECK_FALSE(refused(roles.producer_dsn(),
                      "SELECT \"" + schema.name() + "\".enqueue('ex', 'rk', 'T', 'x'::bytea, deliver_at => now())"));
  // The relay may not reschedule a row (a changed deliver_at would move its due time).
  CHECK(refused(roles.relay_dsn(), "UPDATE " + t + " SET deliver_at = now()"));
}

TEST_CASE("re-running roles.sql narrows table-wide grants made before to the column grants") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/true);
  const std::string t = "\"" + schema.name() + "\".outbox";
  sql_exec(insert_with(t, "", ""));
  // An older roles.sql, or an operator's hand: table-wide UPDATE, INSERT and DELETE.
  sql_exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + t + " TO " + roles.relay() + ", " + roles.producer());
  sql_exec("GRANT UPDATE (payload) ON " + t + " TO " + roles.relay());
  REQUIRE_FALSE(refused(roles.relay_dsn(), "UPDATE " + t + " SET payload = 'evil'"));
  roles.run_roles_sql(/*retention=*/false);
  CHECK(refused(roles.relay_dsn(), "UPDATE " + t + " SET payload = 'evil'"));
  CHECK(refused(roles.relay_dsn(), "UPDATE " + t + " SET exchange = 'evil'"));
  CHECK(refused(roles.relay_dsn(), "DELETE FROM " + t));
  CHECK(refused(roles.relay_dsn(), insert_with(t, "", "")));
  CHECK(refused(roles.producer_dsn(), insert_with(t, "published_at", "now()")));
  CHECK(refused(roles.producer_dsn(), "SELECT payload FROM " + t));
  CHECK(refused(roles.producer_dsn(), "DELETE FROM " + t));
  CHECK_FALSE(refused(roles.relay_dsn(), "UPDATE " + t + " SET published_at = now()"));
  CHECK_FALSE(refused(roles.producer_dsn(), insert_with(t, "", "")));
}

TEST_CASE("under the column grants the relay's admin commands work: status, dead list and requeue, replay, cleanup") {
  ScopedSchema schema;
  TestBroker broker;
  ScopedRoles roles(schema, /*retention=*/true);
  const std::string t = "\"" + schema.name() + "\".outbox";
  std::vector<std::string> ids;
  {
    pqxx::connection conn(roles.producer_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    for (int i = 0; i < 3; ++i) ids.push_back(writer.enqueue(tx, event(broker, i)).to_string());
    tx.commit();
  }
  auto drain = [&] {
    RelayProcess relay(relay_yaml(schema, roles), /*exit_when_idle=*/true);
    int code = relay.wait();
    if (code != 0) MESSAGE(relay.log());
    return code;
  };
  REQUIRE(drain() == 0);
  CHECK(broker.receive(3, std::chrono::milliseconds(1500)).size() == 3);
  const auto config = config_file(schema, roles);

  auto replay = run_relay_command({"replay", "--config", config, "--id", ids[0]});
  INFO(replay.output);
  CHECK(replay.exit_code == 0);
  REQUIRE(drain() == 0);
  CHECK(broker.receive(1, std::chrono::milliseconds(1500)).size() == 1);

  sql_exec("UPDATE " + t + " SET published_at = NULL, parked_at = now(), attempts = 10 WHERE message_id = '" + ids[1] +
           "'");
  auto status = run_relay_command({"status", "--config", config});
  INFO(status.output);
  CHECK(status.exit_code == 0);
  auto list = run_relay_command({"dead", "list", "--config", config});
  INFO(list.output);
  CHECK(list.exit_code == 0);
  CHECK(contains(list.output, ids[1]));
  auto requeue = run_relay_command({"dead", "requeue", "--config", config, "--all", "--expect", "1"});
  INFO(requeue.output);
  CHECK(requeue.exit_code == 0);
  REQUIRE(drain() == 0);
  CHECK(broker.receive(1, std::chrono::milliseconds(1500)).size() == 1);

  sql_exec("UPDATE " + t + " SET published_at = now() - interval '2 days', created_at = now() - interval '3 days'");
  auto cleanup = run_relay_command({"cleanup", "--config", config, "--older-than", "1d"});
  INFO(cleanup.output);
  CHECK(cleanup.exit_code == 0);
  CHECK(sql_value("SELECT count(*) FROM " + t) == "0");
}

TEST_CASE("the producer role creates subject keys for field encryption but cannot erase or overwrite them") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/false);
  const std::string keys = "\"" + schema.name() + "\".outbox_subject_keys";
  SubjectKeyStore store(schema.name(), cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1"));
  {
    pqxx::connection conn(roles.producer_dsn());
    pqxx::work tx(conn);
    CHECK(store.acquire(tx, {"customer-1"}).size() == 1);
    tx.commit();
  }
  CHECK(sql_value("SELECT count(*) FROM " + keys + " WHERE wrapped_key IS NOT NULL") == "1");
  {
    pqxx::connection conn(roles.producer_dsn());
    pqxx::work tx(conn);
    CHECK_THROWS_AS(store.erase(tx, "customer-1"), pqxx::insufficient_privilege);
  }
  CHECK(refused(roles.producer_dsn(), "UPDATE " + keys + " SET wrapped_key = NULL"));
  CHECK(refused(roles.producer_dsn(), "DELETE FROM " + keys));
  // A tombstone planted by a producer would refuse that subject's events for good.
  CHECK(refused(roles.producer_dsn(), "INSERT INTO " + keys +
                                          " (subject, key_id, erased_at) "
                                          "VALUES ('customer-2', 'sk_x', now())"));
  CHECK(refused(roles.relay_dsn(), "SELECT * FROM " + keys));
}
