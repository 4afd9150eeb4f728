// A stall is visible: rows due, the links up, nothing published. /readyz says why
// (not "not connected"), outbox_relay_publish_stalled is 1, the log says it once,
// and all of it clears when rows are published again.
#include <doctest/doctest.h>

#include <csignal>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <thread>

#include "http_scrape.h"
#include "outbox/amqp/amqp_uri.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "tcp_proxy.h"
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

TEST_CASE("a batch of big rows published slowly but steadily is neither a stall nor unready") {
  ScopedSchema schema;
  TestBroker broker;
  const auto target = amqp::AmqpUri::parse(testenv::amqp_uri(), "OUTBOX_AMQP_URI");
  testenv::TcpProxy link(target.host(), static_cast<std::uint16_t>(target.port()));
  std::string yaml = testenv::relay_config_yaml(schema.name(),
                                                "  batch_size: 10\n  pipeline_depth: 1\n  stall_after_s: 3\n") +
                     "http:\n  listen: 127.0.0.1:0\n  ready_max_claim_age_s: 3\n";
  const std::string from = "${OUTBOX_AMQP_URI}";
  yaml.replace(yaml.find(from), from.size(),
               "amqp://" + testenv::percent_encoded(target.user()) + ":" + testenv::percent_encoded(target.password()) +
                   "@127.0.0.1:" + std::to_string(link.port()) + "/" + testenv::percent_encoded(target.vhost()));
  RelayProcess relay(yaml);
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  REQUIRE_MESSAGE(testenv::eventually(15s, [&] { return testenv::http_request(address, "/readyz").status == 200; }),
                  relay.log());

  // Then 10 rows of 1 MB in one batch, over a link of about 1.5 MB/s: the batch takes
  // several seconds, over stall_after_s and ready_max_claim_age_s (3 s), while the
  // broker acks a row every second or less.
  link.set_delay_ms(40);  // 64 KiB per 40 ms and direction, at most
  {
    OutboxWriter writer({schema.name(), {}});
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    for (int i = 0; i < 10; ++i) {
      Message m;
      m.exchange = Exchange(broker.exchange());
      m.routing_key = RoutingKey(broker.routing_key());
      m.type = MessageType("BigRow");
      m.payload = R"({"pad":")" + std::string(1000 * 1000, 'x') + R"("})";
      writer.enqueue(tx, m);
    }
    tx.commit();
  }
  const auto began = std::chrono::steady_clock::now();
  const auto published = [&] {
    return testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NOT NULL");
  };
  std::vector<std::string> unready;
  while (published() != "10" && std::chrono::steady_clock::now() - began < 60s) {
    auto ready = testenv::http_request(address, "/readyz");
    if (ready.status != 200) unready.push_back(ready.body);
    if (stalled_gauge(address) != 0) unready.push_back("outbox_relay_publish_stalled 1");
    std::this_thread::sleep_for(200ms);
  }
  const auto took = std::chrono::steady_clock::now() - began;
  REQUIRE_MESSAGE(published() == "10", relay.log());
  // The batch did outlast both limits, or the test proves nothing.
  CHECK(took > 4s);
  CHECK_MESSAGE(unready.empty(), unready.front());
  CHECK(testenv::lines_with(relay.log(), "publishing stalled") == 0);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
}
