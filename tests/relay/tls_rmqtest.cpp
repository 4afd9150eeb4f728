// TLS on both of the relay's links, against a private PostgreSQL and RabbitMQ that
// this test starts with certificates it generates (the shared servers run without
// TLS and must not be reconfigured).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "consumer_test_support.h"
#include "outbox/consumer_runner.h"
#include "outbox/message_id.h"
#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "tcp_proxy.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::TestBroker;

namespace {

using testenv::contains;

std::string run_output(const std::string& cmd) {
  auto out = testenv::write_temp_file("", ".out");
  // The caller judges the output; the exit status is not needed (and must be read:
  // _FORTIFY_SOURCE marks system() warn_unused_result).
  [[maybe_unused]] const int status = std::system((cmd + " >" + out + " 2>&1").c_str());
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(out.c_str());
  return s.str();
}

// A private PostgreSQL (ssl = on) and RabbitMQ (plain and amqps:// listeners),
// started once for this test binary with a CA and server certificate generated
// here, and stopped at exit. While it lives, OUTBOX_PG_DSN and OUTBOX_AMQP_URI
// point the test helpers at it (plain connections, for setup and checks).
class TlsServers {
 public:
  TlsServers() : dir_("/tmp/" + testenv::unique_name("outbox_tls")) {
    std::mt19937 rng(std::random_device{}());
    for (int tries = 0; tries < 100; ++tries) {
      int p = 36000 + static_cast<int>(rng() % 9000);  // AMQP; dist port p+20000 < 65535
      if (testenv::port_free(p) && testenv::port_free(p + 1) && testenv::port_free(p + 2) &&
          testenv::port_free(p + 20000)) {
        amqp_port_ = p;
        break;
      }
    }
    REQUIRE(amqp_port_ > 0);
    pg_port_ = amqp_port_ + 2;
    REQUIRE(std::system(("\"" OUTBOX_MAKE_CERTS "\" " + dir_ + "/tls").c_str()) == 0);
    env_ = "OUTBOX_LOCAL_DIR=" + dir_ + "/servers OUTBOX_PG_PORT=" + std::to_string(pg_port_) +
           " OUTBOX_AMQP_PORT=" + std::to_string(amqp_port_) + " OUTBOX_TLS_DIR=" + dir_ + "/tls ";
    auto out = run_output("env " + env_ + OUTBOX_SERVERS_SH " start");
    REQUIRE_MESSAGE(contains(out, "rabbitmq: started"), out);
    setenv("OUTBOX_PG_DSN",
           ("host=127.0.0.1 port=" + std::to_string(pg_port_) + " user=postgres dbname=postgres").c_str(), 1);
    setenv("OUTBOX_TEST_AMQP_PASSWORD", "guest", 1);  // the relay reads it as ${...}
    setenv("OUTBOX_AMQP_URI", ("amqp://guest:guest@127.0.0.1:" + std::to_string(amqp_port_) + "/%2f").c_str(), 1);
  }
  ~TlsServers() {
    // Best effort in a destructor: a failure leaves servers or files of this test behind.
    [[maybe_unused]] const int stopped =
        std::system(("env " + env_ + OUTBOX_SERVERS_SH " stop >/dev/null 2>&1").c_str());
    [[maybe_unused]] const int removed = std::system(("rm -rf " + dir_).c_str());
  }
  std::string ca(const std::string& name = "ca.crt") const { return dir_ + "/tls/" + name; }
  int pg_port() const { return pg_port_; }
  std::string socket_dir() const { return dir_ + "/servers/pg"; }  // servers.sh: -k $PG_DIR
  int amqps_port() const { return amqp_port_ + 1; }
  std::string rabbitmqctl(const std::string& args) const {
    return run_output("env " + env_ + OUTBOX_SERVERS_SH " rabbitmqctl " + args);
  }

 private:
  std::string dir_, env_;
  int amqp_port_ = 0, pg_port_ = 0;
};

TlsServers& servers() {
  static TlsServers s;
  return s;
}

struct TlsOptions {
  std::string pg_host = "localhost", pg_ca = "ca.crt";
  std::string amqp_host = "localhost", amqp_ca = "ca.crt";
  bool verify_hostname = true;
};

std::string tls_yaml(const ScopedSchema& schema, const TlsOptions& o = {}) {
  auto& s = servers();
  std::ostringstream y;
  y << "postgres:\n  dsn: host=" << o.pg_host << " port=" << s.pg_port()
    << " user=postgres dbname=postgres sslmode=verify-full sslrootcert=" << s.ca(o.pg_ca)
    << "\n  schema: " << schema.name() << "\n  require_tls: true\n"
    << "amqp:\n  uri: amqps://guest:${OUTBOX_TEST_AMQP_PASSWORD}@" << o.amqp_host << ":" << s.amqps_port()
    << "/%2f\n  ca_file: " << s.ca(o.amqp_ca)
    << "\n"
    // amqp.require_tls refuses verify_hostname: false.
    << "  require_tls: " << (o.verify_hostname ? "true" : "false") << "\n"
    << "  verify_hostname: " << (o.verify_hostname ? "true" : "false") << "\n"
    << "  heartbeat_s: 5\n  confirm_timeout_ms: 10000\n"
    << "relay:\n  poll_interval_ms: 50\nlog:\n  level: debug\n";
  return y.str();
}

void enqueue(const ScopedSchema& schema, const TestBroker& broker, int n) {
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (int i = 0; i < n; ++i) {
    Message m;
    m.exchange = Exchange(broker.exchange());
    m.routing_key = RoutingKey(broker.routing_key());
    m.type = MessageType("OrderPlaced");
    m.payload = R"({"i":)" + std::to_string(i) + "}";
    writer.enqueue(tx, m);
  }
  tx.commit();
}

// Waits until the relay's log contains `text`.
bool log_shows(RelayProcess& relay, const std::string& text) {
  return testenv::eventually(std::chrono::seconds(15), [&] { return contains(relay.log(), text); });
}

}  // namespace

TEST_CASE("with require_tls, the relay publishes over amqps:// and sslmode=verify-full, on encrypted sessions") {
  servers();
  ScopedSchema schema;
  TestBroker broker;
  enqueue(schema, broker, 10);
  RelayProcess relay(tls_yaml(schema));
  auto got = broker.receive(10, std::chrono::milliseconds(10000));
  CHECK(got.size() == 10);
  // The server side of each session says it is TLS.
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
                           "WHERE application_name = 'outbox-relay' AND ssl") != "0");
  CHECK(testenv::sql_value("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
                           "WHERE application_name = 'outbox-relay' AND NOT ssl") == "0");
  auto conns = servers().rabbitmqctl("list_connections -q ssl port");
  CHECK_MESSAGE(contains(conns, "true\t" + std::to_string(servers().amqps_port())), conns);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "0");
}

TEST_CASE(
    "with require_tls, a reconnect that falls back to a Unix socket (where sslmode does not apply) is refused, not "
    "used") {
  servers();
  ScopedSchema schema;
  TestBroker broker;
  testenv::TcpProxy proxy("127.0.0.1", static_cast<std::uint16_t>(servers().pg_port()));
  // The TCP host first (through the proxy), then the server's socket directory: libpq
  // tries them in turn, and over the socket it uses no TLS whatever sslmode says.
  auto yaml = tls_yaml(schema);
  const std::string tcp = "host=localhost port=" + std::to_string(servers().pg_port());
  REQUIRE(yaml.find(tcp) != std::string::npos);
  yaml.replace(yaml.find(tcp), tcp.size(),
               "host=localhost," + servers().socket_dir() + " port=" + std::to_string(proxy.port()) + "," +
                   std::to_string(servers().pg_port()));
  enqueue(schema, broker, 5);
  RelayProcess relay(yaml);
  REQUIRE_MESSAGE(broker.receive(5, std::chrono::milliseconds(10000)).size() == 5, relay.log());
  const auto pending = [&] {
    return testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL");
  };
  REQUIRE(testenv::eventually(std::chrono::seconds(5), [&] { return pending() == "0"; }));
  // The TCP path goes away; the relay's sessions are cut and must not come back over the socket.
  proxy.set_refusing(true);
  proxy.cut_all();
  enqueue(schema, broker, 5);
  CHECK_MESSAGE(log_shows(relay, "the PostgreSQL session is not encrypted"), relay.log());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(pending() == "5");
  // The TCP path is back: the relay publishes over TLS again.
  proxy.set_refusing(false);
  CHECK_MESSAGE(testenv::eventually(std::chrono::seconds(15), [&] { return pending() == "0"; }), relay.log());
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
}

TEST_CASE("a broker certificate from another CA, or not naming the host, is refused and nothing is published") {
  servers();
  ScopedSchema schema;
  TestBroker broker;
  enqueue(schema, broker, 3);
  SUBCASE("unknown CA") {
    TlsOptions o;
    o.amqp_ca = "rogue-ca.crt";
    RelayProcess relay(tls_yaml(schema, o));
    CHECK(log_shows(relay, "(TLS): SSL peer cert verification failed"));
  }
  SUBCASE("host name not in the certificate") {
    TlsOptions o;
    o.amqp_host = "127.0.0.1";  // the certificate names only localhost
    RelayProcess relay(tls_yaml(schema, o));
    CHECK(log_shows(relay, "(TLS): SSL hostname verification failed"));
  }
  CHECK(broker.ready_count() == 0);
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox WHERE published_at IS NULL") == "3");
}

TEST_CASE(
    "verify_hostname: false (without require_tls) accepts the certificate for an IP address, still checks the CA, and "
    "is warned about") {
  servers();
  ScopedSchema schema;
  TestBroker broker;
  enqueue(schema, broker, 2);
  TlsOptions o;
  o.amqp_host = "127.0.0.1";
  o.verify_hostname = false;
  RelayProcess relay(tls_yaml(schema, o));
  CHECK(broker.receive(2, std::chrono::milliseconds(10000)).size() == 2);
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  CHECK(contains(relay.log(), "the server is not verified for amqp (verify_hostname: false)"));
  CHECK_FALSE(contains(relay.log(), "not verified for postgres"));
}

TEST_CASE("PostgreSQL verify-full refuses a certificate from another CA and a host it does not name") {
  servers();
  ScopedSchema schema;
  SUBCASE("unknown CA") {
    TlsOptions o;
    o.pg_ca = "rogue-ca.crt";
    RelayProcess relay(tls_yaml(schema, o));
    CHECK(log_shows(relay, "certificate verify failed"));
    CHECK_FALSE(contains(relay.log(), "relay starting"));  // never got past the start checks
  }
  SUBCASE("host name not in the certificate") {
    TlsOptions o;
    o.pg_host = "127.0.0.1";
    RelayProcess relay(tls_yaml(schema, o));
    CHECK(log_shows(relay, "does not match host name \"127.0.0.1\""));
  }
}

TEST_CASE("require_tls refuses plain URIs and DSNs before connecting, with exit 2") {
  servers();
  ScopedSchema schema;
  auto yaml = tls_yaml(schema);
  auto plain_amqp = yaml;
  plain_amqp.replace(plain_amqp.find("amqps://"), 8, "amqp://");
  RelayProcess relay(plain_amqp);
  CHECK(relay.wait() == 2);
  CHECK(contains(relay.log(), "amqp.require_tls: is true, but amqp.uri is a plain amqp:// URI"));
  auto plain_pg = yaml;
  plain_pg.replace(plain_pg.find("sslmode=verify-full"), 19, "sslmode=disable");
  RelayProcess relay2(plain_pg);
  CHECK(relay2.wait() == 2);
  CHECK(contains(relay2.log(), "postgres.require_tls: is true, but postgres.dsn uses sslmode=disable"));
}

TEST_CASE("require_tls is not fooled by a later sslmode, a quoted one, or verify_hostname: false") {
  servers();
  ScopedSchema schema;
  const auto yaml = tls_yaml(schema);
  struct Case {
    std::string from, to, refusal;
  };
  const std::vector<Case> cases = {
      // libpq uses the last sslmode: this one would connect without checking the certificate.
      {"sslmode=verify-full", "sslmode=verify-full sslmode=require",
       "postgres.require_tls: is true, but postgres.dsn uses sslmode=require"},
      {"sslmode=verify-full", "application_name='x sslmode=verify-full'",
       "postgres.require_tls: is true, but postgres.dsn uses sslmode=prefer"},
      {"sslmode=verify-full", "sslmode=verify-ca", "postgres.dsn uses sslmode=verify-ca"},
      {"  verify_hostname: true", "  verify_hostname: false",
       "amqp.verify_hostname: is false, but amqp.require_tls is true"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.to);
    auto bad = yaml;
    bad.replace(bad.find(c.from), c.from.size(), c.to);
    auto check = testenv::run_relay_command({"check-config", testenv::write_temp_file(bad), "--connect"});
    CHECK(check.exit_code == 2);
    CHECK(contains(check.output, c.refusal));
    RelayProcess relay(bad);
    CHECK(relay.wait() == 2);
    CHECK(contains(relay.log(), c.refusal));
  }
}

namespace {

// The consumer runner's options for `topology`, over amqps:// to the private broker.
outbox::RunnerOptions tls_consumer_options(const ScopedSchema& schema, const testenv::ConsumerTopology& topology,
                                           const TlsOptions& o = {}) {
  auto options = topology.options(schema.name(), testenv::unique_name("tls_consumer"));
  options.amqp_uri = "amqps://guest:guest@" + o.amqp_host + ":" + std::to_string(servers().amqps_port()) + "/%2f";
  options.amqp_ca_file = servers().ca(o.amqp_ca);
  options.amqp_verify_hostname = o.verify_hostname;
  return options;
}

// Starts a runner for `options` and publishes `n` messages in plain to its exchange;
// returns how many it handled within 10 s.
int consume(const outbox::RunnerOptions& options, const testenv::ConsumerTopology& topology, int n) {
  std::atomic<int> handled{0};
  outbox::ConsumerRunner runner(options, [&](pqxx::transaction_base&, const outbox::Delivery&) { ++handled; });
  runner.start();
  testenv::TestPublisher publisher;
  for (int i = 0; i < n; ++i) {
    testenv::TestPublisher::Options m;
    m.message_id = MessageId::generate_v7().to_string();
    publisher.publish(topology.exchange, topology.routing_key, "{}", m);
  }
  testenv::eventually(std::chrono::seconds(10), [&] { return handled == n; });
  // Checked while the workers are connected: their sessions are TLS on the amqps port.
  auto conns = servers().rabbitmqctl("list_connections -q ssl port client_properties");
  CHECK_MESSAGE(contains(conns, "true\t" + std::to_string(servers().amqps_port())), conns);
  CHECK_MESSAGE(contains(conns, "outbox-consumer " + options.consumer.value() + "#0"), conns);
  runner.stop();
  runner.wait();
  return handled;
}

// What ConsumerRunner::start() throws for `options`; fails the test when it starts.
std::string start_error(const outbox::RunnerOptions& options) {
  outbox::ConsumerRunner runner(options, [](pqxx::transaction_base&, const outbox::Delivery&) {});
  return testenv::error_of<std::exception>([&] { runner.start(); });
}

}  // namespace

TEST_CASE("the consumer runner consumes over amqps://, verifying the broker against amqp_ca_file") {
  servers();
  ScopedSchema schema;
  testenv::ConsumerTopology topology("tlsc");
  CHECK(consume(tls_consumer_options(schema, topology), topology, 3) == 3);
}

TEST_CASE("the consumer refuses a broker certificate from another CA, or not naming the host, without the password") {
  servers();
  ScopedSchema schema;
  testenv::ConsumerTopology topology("tlsc");
  TlsOptions o;
  SUBCASE("unknown CA") {
    o.amqp_ca = "rogue-ca.crt";
    auto error = start_error(tls_consumer_options(schema, topology, o));
    CHECK_MESSAGE(contains(error, "(TLS): SSL peer cert verification failed"), error);
    CHECK_FALSE(contains(error, "guest"));
  }
  SUBCASE("host name not in the certificate") {
    o.amqp_host = "127.0.0.1";
    auto error = start_error(tls_consumer_options(schema, topology, o));
    CHECK_MESSAGE(contains(error, "cannot connect to 127.0.0.1:" + std::to_string(servers().amqps_port()) +
                                      "// (TLS): SSL hostname verification failed"),
                  error);
    CHECK_FALSE(contains(error, "guest"));
  }
  SUBCASE("a CA file that cannot be loaded is named by its option") {
    auto options = tls_consumer_options(schema, topology);
    options.amqp_ca_file = "/nonexistent/ca.crt";
    CHECK(start_error(options) == "amqp_ca_file: cannot load CA certificates from '/nonexistent/ca.crt'");
  }
}

TEST_CASE(
    "the consumer with amqp_verify_hostname false accepts the certificate for an IP address, still checks the CA") {
  servers();
  ScopedSchema schema;
  testenv::ConsumerTopology topology("tlsc");
  TlsOptions o;
  o.amqp_host = "127.0.0.1";
  o.verify_hostname = false;
  CHECK(consume(tls_consumer_options(schema, topology, o), topology, 2) == 2);
  o.amqp_ca = "rogue-ca.crt";
  CHECK(contains(start_error(tls_consumer_options(schema, topology, o)), "SSL peer cert verification failed"));
}
