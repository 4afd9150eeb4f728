// No byte of a password reaches any output: check-config, check-config --connect,
// status and run (its log), with passwords full of @:/%?# (percent-encoded in URIs,
// raw inside single quotes in keyword DSNs), a space and quotes, against a host name
// that does not resolve, a port nobody listens on, and the real servers refusing
// the login. Every output is searched for every 4-byte piece of each password.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "outbox/pg_conninfo.h"
#include "relay_process.h"
#include "test_env.h"

using testenv::leaked_fragment;
using testenv::run_relay_command;
using testenv::write_temp_file;

namespace {

const std::vector<std::string> kPasswords = {
    "Zq7@:/TOPSECRETPART%?#Wx@:9",  // every URI delimiter, mixed with letters
    "@:/%?#@:/%?#",                 // nothing but delimiters
    "sp ace'quo\"te\\Kx@:/",        // a space, both quotes, a backslash
};

std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Endpoints {
  std::string name, pg_host, pg_port, pg_user, amqp_host_port, amqp_user;
};

std::vector<Endpoints> endpoints() {
  auto pg = outbox::PgConnInfo::parse(testenv::pg_dsn());
  const auto amqp = testenv::amqp_uri();  // amqp://guest:guest@127.0.0.1:PORT/%2f
  const auto at = amqp.find('@'), slash = amqp.find('/', at);
  return {
      {"a host name that does not resolve", "nosuch-host.invalid", "5432", "relay", "nosuch-host.invalid:5672",
       "relay"},
      {"a port nobody listens on", "127.0.0.1", "1", "relay", "127.0.0.1:1", "relay"},
      {"the real servers refusing the login", pg.get("host").value_or("127.0.0.1"), pg.get("port").value_or("5432"),
       testenv::unique_name("nosuch_role"), amqp.substr(at + 1, slash - at - 1), "guest"},
  };
}

std::string config_yaml(const std::string& dsn, const std::string& uri) {
  return "postgres:\n  dsn: " + yaml_quoted(dsn) +
         "\n  connect_timeout_s: 2\n"
         "amqp:\n  uri: " +
         yaml_quoted(uri) +
         "\n  connect_timeout_ms: 2000\n"
         "log:\n  level: debug\n";
}

// Every output of the four commands for one configuration.
std::string all_outputs(const std::string& yaml, int expected_check_config) {
  const auto file = write_temp_file(yaml);
  std::string out;
  auto check = run_relay_command({"check-config", file});
  CHECK(check.exit_code == expected_check_config);
  out += check.output;
  auto connect = run_relay_command({"check-config", file, "--connect"});
  CHECK(connect.exit_code == (expected_check_config == 0 ? 1 : expected_check_config));
  out += connect.output;
  auto status = run_relay_command({"status", "--config", file});
  CHECK(status.exit_code == (expected_check_config == 0 ? 1 : expected_check_config));
  out += status.output;
  testenv::RelayProcess relay(yaml);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  relay.signal(SIGTERM);
  relay.wait();
  out += relay.log();
  return out;
}

}  // namespace

TEST_CASE("a password full of @:/%?# never reaches any output, whatever the server says") {
  for (const auto& e : endpoints()) {
    for (const auto& pw : kPasswords) {
      const auto amqp = "amqp://" + e.amqp_user + ":" + testenv::percent_encoded(pw) + "@" + e.amqp_host_port + "/%2f";
      const std::vector<std::string> dsns = {"postgresql://" + e.pg_user + ":" + testenv::percent_encoded(pw) + "@" +
                                                 e.pg_host + ":" + e.pg_port + "/postgres",
                                             "host=" + e.pg_host + " port=" + e.pg_port + " user=" + e.pg_user +
                                                 " dbname=postgres password=" + testenv::single_quoted(pw)};
      for (const auto& dsn : dsns) {
        CAPTURE(e.name);
        CAPTURE(dsn);
        const auto out = all_outputs(config_yaml(dsn, amqp), 0);
        CHECK_MESSAGE(leaked_fragment(out, pw).empty(), out);
        // The failures are reported, naming the servers (so the test saw them fail).
        CHECK(out.find("postgres: FAILED") != std::string::npos);
        CHECK(out.find("amqp: FAILED") != std::string::npos);
        CHECK(out.find("status failed") != std::string::npos);
        CHECK(out.find("cannot connect, will retry with backoff: PostgreSQL: ") != std::string::npos);
      }
    }
  }
}

TEST_CASE("a URI whose password is not percent-encoded is a configuration error that shows none of it") {
  const std::string pw = "Zq7@x:TOPSECRETPART/9";
  for (const auto& [dsn, uri] : std::vector<std::pair<std::string, std::string>>{
           {"postgresql://relay:" + pw + "@127.0.0.1:39432/app", "amqp://guest:guest@127.0.0.1:1/%2f"},
           {"postgresql://relay:Zq7x@TOPSECRETPART@127.0.0.1:39432/app", "amqp://guest:guest@127.0.0.1:1/%2f"},
           {"host=127.0.0.1 port=1", "amqp://relay:" + pw + "@127.0.0.1:1/%2f"}}) {
    CAPTURE(dsn);
    const auto out = all_outputs(config_yaml(dsn, uri), 2);
    CHECK_MESSAGE(leaked_fragment(out, pw).empty(), out);
    CHECK(out.find("percent-encode") != std::string::npos);
  }
}
