// Outages that persist are loud: every failed connection attempt is counted by
// target and cause, /readyz names the error, and an error no retry fixes is said to
// be permanent in the log.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "http_scrape.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using namespace std::chrono_literals;
using testenv::contains;
using testenv::RelayProcess;
using testenv::ScopedSchema;

namespace {

double connect_failures(const std::string& address, const std::string& target, const std::string& cause) {
  return testenv::parse_prometheus(
      testenv::http_request(address, "/metrics")
          .body)["outbox_relay_connect_failures_total{target=\"" + target + "\",cause=\"" + cause + "\"}"];
}

std::string with(std::string yaml, const std::string& from, const std::string& to) {
  yaml.replace(yaml.find(from), from.size(), to);
  return yaml;
}

}  // namespace

TEST_CASE("an unknown database is counted, named on /readyz and logged as permanent, attempt after attempt") {
  ScopedSchema schema;
  const std::string db = testenv::unique_name("no_such_db");
  RelayProcess relay(with(testenv::relay_config_yaml(schema.name()) + "http:\n  listen: 127.0.0.1:0\n",
                          "${OUTBOX_PG_DSN}", testenv::pg_dsn() + " dbname=" + db));
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  REQUIRE_MESSAGE(testenv::eventually(20s,
                                      [&] { return connect_failures(address, "postgres", "unknown_database") >= 3; }),
                  relay.log());
  const auto ready = testenv::http_request(address, "/readyz");
  CHECK(ready.status == 503);
  CHECK_MESSAGE(contains(ready.body, "not connected to PostgreSQL: PostgreSQL: "), ready.body);
  CHECK_MESSAGE(contains(ready.body, db), ready.body);
  CHECK_MESSAGE(contains(ready.body, "permanent: unknown_database"), ready.body);
  CHECK_MESSAGE(contains(relay.log(), "cannot connect, will retry with backoff: PostgreSQL: "), relay.log());
  CHECK_MESSAGE(contains(relay.log(), "no retry fixes this"), relay.log());
}

TEST_CASE("a broker port nothing listens on is counted as refused and the log says so") {
  ScopedSchema schema;
  RelayProcess relay(with(testenv::relay_config_yaml(schema.name()) + "http:\n  listen: 127.0.0.1:0\n",
                          "${OUTBOX_AMQP_URI}", "amqp://guest:guest@127.0.0.1:1/"));
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  REQUIRE_MESSAGE(testenv::eventually(20s, [&] { return connect_failures(address, "amqp", "refused") >= 2; }),
                  relay.log());
  CHECK_MESSAGE(contains(relay.log(), "(connection refused)"), relay.log());
  CHECK_FALSE(contains(relay.log(), "permanent"));
  const auto ready = testenv::http_request(address, "/readyz");
  CHECK(ready.status == 503);
  CHECK_MESSAGE(contains(ready.body, "not connected to RabbitMQ: AMQP: cannot connect to 127.0.0.1:1/"), ready.body);
}

// The broker's own refusals, as rabbitmq-c hands them over (connection.close 403 at
// the login, 530 at connection.open), are permanent, counted by their cause.
TEST_CASE("a broker that refuses the login or the vhost is counted as authentication or vhost, and permanent") {
  const auto uri = testenv::amqp_uri();  // amqp://guest:guest@127.0.0.1:PORT/%2f
  const auto at = uri.find('@'), slash = uri.find('/', at);
  const auto host_port = uri.substr(at + 1, slash - at - 1);
  struct Refusal {
    std::string uri, cause, reply;
  };
  const Refusal refusals[] = {
      {"amqp://guest:not-the-password@" + host_port + "/%2f", "authentication", "ACCESS_REFUSED"},
      {"amqp://guest:guest@" + host_port + "/" + testenv::unique_name("no_such_vhost"), "vhost", "NOT_ALLOWED"},
  };
  for (const auto& r : refusals) {
    CAPTURE(r.cause);
    ScopedSchema schema;
    RelayProcess relay(with(testenv::relay_config_yaml(schema.name()) + "http:\n  listen: 127.0.0.1:0\n",
                            "${OUTBOX_AMQP_URI}", r.uri));
    const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
    REQUIRE_MESSAGE(testenv::eventually(20s, [&] { return connect_failures(address, "amqp", r.cause) >= 2; }),
                    relay.log());
    const auto ready = testenv::http_request(address, "/readyz");
    CHECK(ready.status == 503);
    CHECK_MESSAGE(contains(ready.body, "permanent: " + r.cause), ready.body);
    CHECK_MESSAGE(contains(relay.log(), r.reply), relay.log());
    CHECK_MESSAGE(contains(relay.log(), "no retry fixes this"), relay.log());
    CHECK_FALSE(contains(relay.log(), "not-the-password"));
  }
}
