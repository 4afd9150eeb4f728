// Producers and consumers in other languages on the SQL contract, against the real
// servers and the real relay binary: a Python producer (psycopg2) and a Node producer
// (pg from npm) write an order row and call SCHEMA.enqueue() in one transaction, some
// transactions rolled back; a Python consumer (pika) applies each event with
// SCHEMA.inbox_record() and acks after commit, with redeliveries forced. Every
// committed order's event has its effect exactly once, none from a rolled-back
// transaction; the message ids are UUIDv7, and the AMQP properties are those of an
// event the C++ SDK wrote. The consumer runs under a consumer login of roles.sql
// mapped to its consumer name (migration 0014).
#include <doctest/doctest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <sstream>

#include "outbox/message_id.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using nlohmann::json;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

struct Produced {
  std::vector<std::pair<std::string, std::string>> committed, rolled_back;  // (order id, message id)
  std::vector<std::string> scheduled;  // committed message ids with a deliver_at ahead (producer.py)
};

Produced run_producer(const std::vector<std::string>& argv) {
  const auto r = testenv::run_command(argv);
  INFO(argv[0] << " " << argv[1] << " said: " << r.output);
  REQUIRE(r.exit_code == 0);
  const auto out = json::parse(r.output);
  Produced p;
  for (const auto& e : out.at("committed")) p.committed.emplace_back(e[0], e[1]);
  for (const auto& e : out.at("rolled_back")) p.rolled_back.emplace_back(e[0], e[1]);
  if (out.contains("scheduled"))
    for (const auto& e : out.at("scheduled")) p.scheduled.push_back(e);
  return p;
}

// The consumer's PostgreSQL login as a deployment sets it up (issue 40): roles.sql's
// consumer role, a login in it mapped to the consumer name 'billing' in
// inbox_consumers, and its application tables' grants. Dropped on destruction.
class BillingLogin {
 public:
  explicit BillingLogin(const ScopedSchema& schema) : prefix_(testenv::unique_name("poly")) {
    const auto s = "\"" + schema.name() + "\"";
    const std::string cmd = "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + schema.name() +
                            " -v relay_role=" + prefix_ + "_relay -v producer_role=" + prefix_ +
                            "_producer -v consumer_role=" + prefix_ + "_consumer -f " + OUTBOX_ROLES_SQL +
                            " >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    sql_exec("CREATE ROLE " + login() + " LOGIN IN ROLE " + prefix_ + "_consumer");
    sql_exec("INSERT INTO " + s + ".inbox_consumers (consumer, member_of) VALUES ('billing', '" + login() + "')");
    sql_exec("GRANT INSERT ON " + s + ".ledger TO " + login());
    sql_exec("GRANT SELECT, UPDATE ON " + s + ".account TO " + login());
  }
  ~BillingLogin() {
    for (const auto& r : {login(), prefix_ + "_consumer", prefix_ + "_producer", prefix_ + "_relay"}) {
      try {
        sql_exec("DROP OWNED BY " + r);
        sql_exec("DROP ROLE " + r);
      } catch (...) {
      }
    }
  }
  BillingLogin(const BillingLogin&) = delete;
  BillingLogin& operator=(const BillingLogin&) = delete;
  std::string login() const { return prefix_ + "_billing"; }
  std::string dsn() const { return testenv::pg_dsn() + " user=" + login(); }

 private:
  std::string prefix_;
};

bool is_uuid_v7(const std::string& text) {
  try {
    MessageId::parse(text);
  } catch (const std::exception&) {
    return false;
  }
  return text[14] == '7' && std::string("89ab").find(text[19]) != std::string::npos;
}

// The property names a delivery carried, and the header names (values vary).
std::string shape(const json& properties) {
  std::string out;
  for (const auto& [name, value] : properties.items()) {
    out += name + ";";
    if (name == "headers")
      for (const auto& [header, _] : value.items()) out += "headers." + header + ";";
  }
  return out;
}

std::string sql_list(const std::vector<std::pair<std::string, std::string>>& pairs, bool first) {
  std::string out;
  for (const auto& p : pairs) out += (out.empty() ? "'" : ", '") + (first ? p.first : p.second) + "'";
  return out.empty() ? "NULL" : out;
}

}  // namespace

TEST_CASE("Python and Node producers and a Python consumer on the SQL contract: each committed order once") {
  ScopedSchema schema("poly");
  testenv::TestBroker broker("poly", "order.placed");
  const auto s = "\"" + schema.name() + "\"";
  sql_exec("CREATE TABLE " + s + ".orders (id text PRIMARY KEY, amount int NOT NULL, source text NOT NULL)");
  // No key on purpose: only the inbox keeps an event from being applied twice.
  sql_exec("CREATE TABLE " + s + ".ledger (order_id text NOT NULL, message_id uuid NOT NULL, amount int NOT NULL)");
  sql_exec("CREATE TABLE " + s + ".account (id int PRIMARY KEY, balance bigint NOT NULL)");
  sql_exec("INSERT INTO " + s + ".account VALUES (1, 0)");

  // The same kind of event written by the C++ SDK, for the properties it gets.
  std::string cpp_id;
  {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    Message m;
    m.exchange = Exchange(broker.exchange());
    m.routing_key = RoutingKey(broker.routing_key());
    m.type = MessageType("OrderPlaced");
    m.ordering_key = "cpp-0";
    m.payload = R"({"order_id":"cpp-0","amount":7})";
    m.headers["tenant"] = "acme";
    m.correlation_id = "req-cpp-0";
    cpp_id = OutboxWriter({schema.name(), {}}).enqueue(tx, m).to_string();
    tx.commit();
  }

  testenv::RelayProcess relay(testenv::relay_config_yaml(schema.name()));
  setenv("NODE_PATH", OUTBOX_POLYGLOT_NODE_MODULES, 1);
  const auto py = run_producer({"/usr/bin/python3", OUTBOX_POLYGLOT_DIR "/producer.py", testenv::pg_dsn(),
                                schema.name(), broker.exchange(), broker.routing_key(), "40", "py"});
  const auto node = run_producer({OUTBOX_NODE_BIN, OUTBOX_POLYGLOT_DIR "/producer.js", testenv::pg_dsn(), schema.name(),
                                  broker.exchange(), broker.routing_key(), "30", "node"});
  CHECK(py.committed.size() == 32);
  CHECK(py.rolled_back.size() == 8);
  CHECK(node.committed.size() == 24);
  CHECK(node.rolled_back.size() == 6);
  auto committed = py.committed;
  committed.insert(committed.end(), node.committed.begin(), node.committed.end());
  auto rolled_back = py.rolled_back;
  rolled_back.insert(rolled_back.end(), node.rolled_back.begin(), node.rolled_back.end());
  committed.emplace_back("cpp-0", cpp_id);

  for (const auto& [order, id] : committed) CHECK_MESSAGE(is_uuid_v7(id), std::string(order + " " + id));
  for (const auto& [order, id] : rolled_back) CHECK_MESSAGE(is_uuid_v7(id), std::string(order + " " + id));
  // A rolled-back transaction left neither its order nor its event.
  CHECK(sql_value("SELECT count(*) FROM " + s + ".outbox WHERE message_id::text IN (" + sql_list(rolled_back, false) +
                  ")") == "0");
  CHECK(sql_value("SELECT count(*) FROM " + s + ".orders WHERE id IN (" + sql_list(rolled_back, true) + ")") == "0");

  // The Python consumer runs under its own least-privilege login, isolated from other
  // consumers' inbox rows: correctly mapped, it works as under the owner.
  const BillingLogin billing(schema);
  const auto log_path = testenv::write_temp_file("", ".jsonl");
  const auto consumed = testenv::run_command({"/usr/bin/python3", OUTBOX_POLYGLOT_DIR "/consumer.py", billing.dsn(),
                                              schema.name(), testenv::amqp_uri(), broker.queue(),
                                              std::to_string(committed.size()), log_path});
  INFO("consumer.py said: " << consumed.output);
  CHECK(consumed.exit_code == 0);

  // Every committed order's effect exactly once, nothing else.
  std::map<std::string, int> effects;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  for (const auto& row : q.exec("SELECT order_id, count(*) FROM " + s + ".ledger GROUP BY order_id"))
    effects[row[0].as<std::string>()] = row[1].as<int>();
  std::map<std::string, int> expected;
  for (const auto& [order, id] : committed) expected[order] = 1;
  CHECK(effects == expected);
  CHECK(outbox::pgx::exec1(q, "SELECT count(*) FROM " + s + ".inbox WHERE consumer = 'billing'")[0].as<std::size_t>() ==
        committed.size());
  // The sequence rule (inbox_sequence, migration 0017) ran for every keyed event:
  // each key's applied sequence is the outbox's, and nothing else was recorded.
  CHECK(outbox::pgx::exec1(q, "SELECT count(*) FROM " + s + ".outbox WHERE key_seq IS NOT NULL")[0].as<int>() > 0);
  CHECK(outbox::pgx::exec1(q, "SELECT count(*) FROM " + s + ".outbox o FULL JOIN (SELECT * FROM " + s +
                                  ".inbox_key_sequences WHERE consumer = 'billing') k ON k.ordering_key = "
                                  "o.ordering_key WHERE o.key_seq IS DISTINCT FROM k.last_seq")[0]
            .as<int>() == 0);
  // The events Python scheduled 1.5 s ahead (deliver_at) were published, none early.
  REQUIRE(py.scheduled.size() >= 4);
  std::vector<std::pair<std::string, std::string>> scheduled;
  for (const auto& id : py.scheduled) scheduled.emplace_back("", id);
  CHECK(outbox::pgx::exec1(q, "SELECT count(*) FROM " + s + ".outbox WHERE message_id::text IN (" +
                                  sql_list(scheduled, false) +
                                  ") AND published_at >= deliver_at AND deliver_at >= created_at + interval '1 "
                                  "second'")[0]
            .as<std::size_t>() == py.scheduled.size());
  CHECK(outbox::pgx::exec1(q, "SELECT balance FROM " + s + ".account")[0].as<long long>() ==
        outbox::pgx::exec1(q, "SELECT sum(amount) FROM " + s + ".orders")[0].as<long long>() + 7);

  // The deliveries: redeliveries came and were skipped; rolled-back ids never came.
  std::ifstream log(log_path);
  std::map<std::string, json> properties;
  std::set<std::string> applied, rolled_back_ids;
  for (const auto& [order, id] : rolled_back) rolled_back_ids.insert(id);
  // Deliveries whose effect committed but which were not acked (nacked as if the ack
  // was lost, or left unacked on a closed connection) must come back and be skipped;
  // those rolled back and nacked must come back and be applied.
  std::set<std::string> unacked_after_commit, nacked_before_commit;
  int skipped = 0, dropped = 0;
  for (std::string line; std::getline(log, line);) {
    const auto d = json::parse(line);
    const std::string id = d.at("message_id"), outcome = d.at("outcome"), settled = d.at("settled");
    CHECK_MESSAGE(rolled_back_ids.count(id) == 0, id);
    properties[id] = d.at("properties");
    if (outcome == "applied") {
      CHECK_MESSAGE(applied.insert(id).second, id);  // never applied twice
      nacked_before_commit.erase(id);
      if (settled != "ack") unacked_after_commit.insert(id);
      dropped += settled == "dropped";
    } else if (outcome == "rolled-back") {
      nacked_before_commit.insert(id);
    } else {
      ++skipped;
      CHECK(d.at("redelivered").get<bool>());
      CHECK_MESSAGE(unacked_after_commit.erase(id) == 1, "skipped " << id << " without an earlier commit");
    }
  }
  CHECK(dropped == 1);
  CHECK(skipped >= 2);                  // redeliveries happened (the dropped one, nacks), and were skipped
  CHECK(unacked_after_commit.empty());  // every one came back
  CHECK(nacked_before_commit.empty());  // every rolled-back try was applied later
  CHECK(applied.size() == committed.size());

  // AMQP properties as the relay sends the C++ SDK's rows.
  REQUIRE(properties.count(cpp_id) == 1);
  const auto& cpp = properties[cpp_id];
  INFO("C++ SDK's event: " << cpp.dump());
  CHECK(cpp.at("delivery_mode") == 2);
  CHECK(cpp.at("message_id") == cpp_id);
  for (const auto* source : {&py, &node}) {
    const auto& [order, id] = source->committed.front();
    REQUIRE(properties.count(id) == 1);
    const auto& p = properties[id];
    INFO(order << ": " << p.dump());
    CHECK(shape(p) == shape(cpp));
    CHECK(p.at("message_id") == id);
    CHECK(p.at("correlation_id") == "req-" + order);
    for (const auto* key : {"content_type", "delivery_mode", "type"}) CHECK(p.at(key) == cpp.at(key));
    CHECK(p.at("headers").at("tenant") == "acme");
    // The relay's sequence headers on a row written by enqueue() from Python and Node.
    CHECK(p.at("headers").at("x-outbox-key") == order);
    CHECK(p.at("headers").at("x-outbox-seq") == 1);
  }
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  ::unlink(log_path.c_str());
}
