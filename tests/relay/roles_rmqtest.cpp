// schema/roles.sql: the relay runs under its least-privilege role, the producer
// role can only insert, and a missing privilege stops the relay at start with a
// message naming it.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Group roles made by schema/roles.sql (run with psql, as an operator would) and
// one login role in each; all dropped on destruction.
class ScopedRoles {
 public:
  ScopedRoles(const ScopedSchema& schema, bool retention)
      : relay_(testenv::unique_name("relay_role")),
        producer_(testenv::unique_name("producer_role")),
        relay_login_(relay_ + "_login"),
        producer_login_(producer_ + "_login") {
    const std::string cmd = "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" +
                            schema.name() + " -v relay_role=" + relay_ + " -v producer_role=" +
                            producer_ + (retention ? " -v retention=true" : "") + " -f " +
                            OUTBOX_ROLES_SQL + " >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    sql_exec("CREATE ROLE " + relay_login_ + " LOGIN IN ROLE " + relay_);
    sql_exec("CREATE ROLE " + producer_login_ + " LOGIN IN ROLE " + producer_);
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
  std::string relay_dsn() const { return testenv::pg_dsn() + " user=" + relay_login_; }
  std::string producer_dsn() const { return testenv::pg_dsn() + " user=" + producer_login_; }
  const std::string& relay_login() const { return relay_login_; }

 private:
  std::string relay_, producer_, relay_login_, producer_login_;
};

std::string relay_yaml(const ScopedSchema& schema, const ScopedRoles& roles, const std::string& extra = "") {
  auto yaml = testenv::relay_config_yaml(schema.name()) + extra;
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

// Runs `sql` as `dsn`; true when the server refuses it for lack of privilege.
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

}  // namespace

TEST_CASE("under the least-privilege roles a producer enqueues and the relay publishes") {
  ScopedSchema schema;
  TestBroker broker;
  ScopedRoles roles(schema, /*retention=*/false);
  {
    pqxx::connection conn(roles.producer_dsn());
    pqxx::work tx(conn);
    OutboxWriter writer({schema.name(), {}});
    for (int i = 0; i < 5; ++i) writer.enqueue(tx, event(broker, i));
    tx.commit();
  }
  RelayProcess relay(relay_yaml(schema, roles), /*exit_when_idle=*/true);
  int code = relay.wait();
  if (code != 0) MESSAGE(relay.log());
  CHECK(code == 0);
  CHECK(broker.receive(5, std::chrono::milliseconds(1500)).size() == 5);
  CHECK(sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL") == "5");
}

TEST_CASE("the producer role can only insert; the relay role cannot insert, delete or change the schema") {
  ScopedSchema schema;
  ScopedRoles roles(schema, /*retention=*/false);
  const std::string t = "\"" + schema.name() + "\".outbox";
  sql_exec("INSERT INTO " + t + " (message_id, exchange, routing_key, message_type, payload) "
           "VALUES (gen_random_uuid(), 'ex', 'rk', 'T', 'x')");
  CHECK(refused(roles.producer_dsn(), "SELECT count(*) FROM " + t));
  CHECK(refused(roles.producer_dsn(), "UPDATE " + t + " SET attempts = 1"));
  CHECK(refused(roles.producer_dsn(), "DELETE FROM " + t));
  CHECK(refused(roles.relay_dsn(), "INSERT INTO " + t + " (message_id, exchange, routing_key, message_type, "
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
