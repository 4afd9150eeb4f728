// amqp.uris at the edge: the real relay against two "nodes" (TCP proxies in front of
// the one test broker, so each can refuse or drop its connections). A node that
// refuses is skipped, a lost connection moves the relay to the next node (the node
// just lost is tried last), and nothing is lost or charged on the way.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "outbox/amqp/amqp_uri.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "tcp_proxy.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;

namespace {

template <class Fn>
bool eventually(std::chrono::milliseconds limit, Fn done) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

// Two proxies to the test broker: node 0 and node 1 of the relay's amqp.uris.
struct TwoNodes {
  amqp::AmqpUri broker = amqp::AmqpUri::parse(testenv::amqp_uri(), "OUTBOX_AMQP_URI");
  testenv::TcpProxy node0{broker.host(), static_cast<std::uint16_t>(broker.port())};
  testenv::TcpProxy node1{broker.host(), static_cast<std::uint16_t>(broker.port())};

  std::string uri(const testenv::TcpProxy& p) const {
    return "amqp://" + testenv::percent_encoded(broker.user()) + ":" + testenv::percent_encoded(broker.password()) +
           "@127.0.0.1:" + std::to_string(p.port()) + "/" + testenv::percent_encoded(broker.vhost());
  }
  std::string config(const std::string& schema) const {
    std::string yaml = testenv::relay_config_yaml(schema);
    const std::string from = "  uri: ${OUTBOX_AMQP_URI}\n";
    yaml.replace(yaml.find(from), from.size(),
                 "  uris:\n    - " + uri(node0) + "\n    - " + uri(node1) +
                     "\n  endpoint_order: in_order\n"
                     "  connect_timeout_ms: 1000\n");
    return yaml;
  }
  std::string endpoint(const testenv::TcpProxy& p) const { return "AMQP 127.0.0.1:" + std::to_string(p.port()) + "/"; }
};

void write_rows(const std::string& schema, const testenv::TestBroker& broker, int n) {
  OutboxWriter writer({schema, {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (int i = 0; i < n; ++i) {
    Message m;
    m.exchange = Exchange(broker.exchange());
    m.routing_key = RoutingKey(broker.routing_key());
    m.type = MessageType("Endpoints");
    m.payload = "{}";
    writer.enqueue(tx, m);
  }
  tx.commit();
}

std::string published(const std::string& schema) {
  return testenv::sql_value("SELECT count(*) FROM \"" + schema + "\".outbox WHERE published_at IS NOT NULL");
}

std::string last_connected_line(const std::string& log) {
  std::istringstream in(log);
  std::string last;
  for (std::string line; std::getline(in, line);)
    if (line.find("connected") != std::string::npos && line.find("AMQP 127.0.0.1:") != std::string::npos) last = line;
  return last;
}

}  // namespace

TEST_CASE("a node that refuses is skipped and the relay publishes through the next one") {
  testenv::ScopedSchema schema;
  testenv::TestBroker broker;
  TwoNodes nodes;
  nodes.node0.set_refusing(true);  // down, booting, or refusing the login
  write_rows(schema.name(), broker, 5);
  testenv::RelayProcess relay(nodes.config(schema.name()));
  REQUIRE_MESSAGE(eventually(15s, [&] { return published(schema.name()) == "5"; }), relay.log());
  CHECK(broker.receive(5, 2000ms).size() == 5);
  const std::string log = relay.log();
  CHECK_MESSAGE(last_connected_line(log).find(nodes.endpoint(nodes.node1)) != std::string::npos, log);
  CHECK_MESSAGE(log.find("127.0.0.1:" + std::to_string(nodes.node0.port())) != std::string::npos, log);  // the refusal
  CHECK(log.find(nodes.broker.password() + "@") == std::string::npos);
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE attempts > 0") == "0");
}

TEST_CASE("a lost connection moves the relay to the next node, and back when that one goes") {
  testenv::ScopedSchema schema;
  testenv::TestBroker broker;
  TwoNodes nodes;
  testenv::RelayProcess relay(nodes.config(schema.name()));
  write_rows(schema.name(), broker, 5);
  REQUIRE_MESSAGE(eventually(15s, [&] { return published(schema.name()) == "5"; }), relay.log());
  CHECK_MESSAGE(last_connected_line(relay.log()).find(nodes.endpoint(nodes.node0)) != std::string::npos, relay.log());

  // Node 0 drops its connections but would accept new ones: the relay still goes to
  // node 1, the node it lost going last.
  CHECK(nodes.node0.cut_all() >= 1);
  write_rows(schema.name(), broker, 5);
  REQUIRE_MESSAGE(eventually(15s, [&] { return published(schema.name()) == "10"; }), relay.log());
  CHECK_MESSAGE(last_connected_line(relay.log()).find(nodes.endpoint(nodes.node1)) != std::string::npos, relay.log());

  CHECK(nodes.node1.cut_all() >= 1);
  write_rows(schema.name(), broker, 5);
  REQUIRE_MESSAGE(eventually(15s, [&] { return published(schema.name()) == "15"; }), relay.log());
  CHECK_MESSAGE(last_connected_line(relay.log()).find(nodes.endpoint(nodes.node0)) != std::string::npos, relay.log());
  CHECK(broker.receive(15, 2000ms).size() >= 15);  // at least once: a cut may cost a copy
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE attempts > 0") == "0");
  CHECK(relay.running());
}
