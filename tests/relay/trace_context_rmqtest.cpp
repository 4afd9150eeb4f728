// W3C trace context end to end: what the producer sets arrives as AMQP headers.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;

TEST_CASE("traceparent and tracestate set at enqueue arrive as the message's headers") {
  testenv::ScopedSchema schema;
  testenv::TestBroker broker;
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const std::string state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    Message traced;
    traced.exchange = Exchange(broker.exchange());
    traced.routing_key = RoutingKey(broker.routing_key());
    traced.type = MessageType("OrderPlaced");
    traced.payload = "{}";
    traced.headers["tenant"] = "acme";
    traced.traceparent = parent;
    traced.tracestate = state;
    Message untraced = traced;
    untraced.traceparent.reset();
    untraced.tracestate.reset();
    writer.enqueue(tx, traced);
    writer.enqueue(tx, untraced);
    tx.commit();
  }
  testenv::RelayProcess relay(testenv::relay_config_yaml(schema.name()), /*exit_when_idle=*/true);
  REQUIRE(relay.wait() == 0);
  auto got = broker.receive(2, std::chrono::milliseconds(1500));
  REQUIRE(got.size() == 2);
  CHECK(got[0].headers.at("traceparent") == parent);
  CHECK(got[0].headers.at("tracestate") == state);
  CHECK(got[0].headers.at("tenant") == "acme");
  CHECK(got[1].headers.count("traceparent") == 0);
  CHECK(got[1].headers.count("tracestate") == 0);
}
