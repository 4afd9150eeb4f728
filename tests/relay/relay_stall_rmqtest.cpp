// A stall is visible: rows due, the links up, nothing published. /readyz says why
// (not "not connected"), outbox_relay_publish_stalled is 1, the log says it once,
// and all of it clears when rows are published again.
#include <doctest/doctest.h>

#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <thread>

#include "http_scrape.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::TestBroker;

namespace {

double stalled_gauge(const std::string& address) {
  return testenv::parse_prometheus(testenv::http_request(address, "/metrics").body)["outbox_relay_publish_stalled"];
}

}  // namespace

TEST_CASE("rows that keep failing with the links up report a stall once, with the cause, until they publish") {
  ScopedSchema schema;
  TestBroker broker;
  const std::string missing = broker.exchange() + "_missing";
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    for (int i = 0; i < 5; ++i) {
      Message m;
      m.exchange = Exchange(missing);
      m.routing_key = RoutingKey(broker.routing_key());
      m.type = MessageType("Stalled");
      m.payload = "{}";
      writer.enqueue(tx, m);
    }
    tx.commit();
  }
  RelayProcess relay(testenv::relay_config_yaml(schema.name(),
                                                "  max_attempts: 1000\n  backoff_initial_ms: 100\n"
                                                "  backoff_max_ms: 200\n  stall_after_s: 2\n") +
                     "http:\n  listen: 127.0.0.1:0\n");
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  CHECK(stalled_gauge(address) == 0);

  testenv::HttpReply ready;
  REQUIRE_MESSAGE(testenv::eventually(15s,
                                      [&] {
                                        ready = testenv::http_request(address, "/readyz");
                                        return ready.status == 503 &&
                                               ready.body.find("publishing stalled") != std::string::npos;
                                      }),
                  relay.log());
  CHECK(ready.body.find("404") != std::string::npos);  // the last failure: the exchange is missing
  CHECK(ready.body.find("not connected") == std::string::npos);
  CHECK(stalled_gauge(address) == 1);
  std::this_thread::sleep_for(2s);  // still stalled: said once, not once per check
  CHECK(testenv::lines_with(relay.log(), "publishing stalled") == 1);

  // An operator's hand fix: the rows name an exchange that exists.
  testenv::sql_exec("UPDATE \"" + schema.name() + "\".outbox SET exchange = '" + broker.exchange() + "'");
  CHECK_MESSAGE(testenv::eventually(15s, [&] { return stalled_gauge(address) == 0; }), relay.log());
  CHECK(testenv::http_request(address, "/readyz").status == 200);
  CHECK(testenv::lines_with(relay.log(), "publishing resumed after a stall") == 1);
  // How long it lasted: from the last progress (over stall_after_s ago), not "0 s".
  std::smatch lasted;
  const std::string log = relay.log();
  REQUIRE(std::regex_search(log, lasted, std::regex(R"(resumed after a stall of (\d+) s)")));
  CHECK(std::stoi(lasted[1]) >= 2);
  CHECK_MESSAGE(testenv::eventually(15s,
                                    [&] {
                                      return testenv::sql_value("SELECT count(*) FROM \"" + schema.name() +
                                                                "\".outbox WHERE published_at IS NOT NULL") == "5";
                                    }),
                relay.log());
  CHECK(broker.receive(5, 2000ms).size() == 5);
  CHECK(relay.running());
}
