// Operations settings of the relay configuration: http, retention, TLS, secrets
// from files, and the inline-password warning of check-config.
#include <doctest/doctest.h>

#include <cstdlib>

#include "config/config.h"
#include "config/endpoint_syntax.h"
#include "relay_process.h"
#include "test_text.h"

using relay::ConfigError;
using relay::parse_config;
using testenv::write_temp_file;

namespace {

const std::string kPlain =
    "postgres:\n  dsn: host=127.0.0.1 user=relay\namqp:\n  uri: amqp://relay@127.0.0.1:5672/%2f\n";

using testenv::contains;

std::string config_error(const std::string& yaml) {
  return testenv::error_of<ConfigError>([&] { parse_config(yaml, "t.yaml"); }, "(no error)");
}

// The warnings about inline passwords (plaintext configurations also carry the
// "server is not verified" warning, tested in tls_policy_test).
std::vector<std::string> inline_warnings(const relay::RelayConfig& c) {
  std::vector<std::string> out;
  for (const auto& w : c.warnings)
    if (!contains(w, "is not verified for")) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("http and retention default to off and parse their keys") {
  auto c = parse_config(kPlain, "t.yaml");
  CHECK(c.http.listen.empty());
  CHECK_FALSE(c.retention.enabled);
  CHECK(inline_warnings(c).empty());
  c = parse_config(kPlain +
                       "http:\n  listen: 0.0.0.0:9187\n  stats_interval_s: 5\n"
                       "retention:\n  enabled: true\n  keep: 3d\n  batch_size: 1000\n  interval_s: 60\n",
                   "t.yaml");
  CHECK(c.http.listen == "0.0.0.0:9187");
  CHECK(c.http.stats_interval_s == 5);
  CHECK(c.retention.enabled);
  CHECK(c.retention.keep_s == 3 * 86400);
  CHECK(c.retention.batch_size == 1000);
}

TEST_CASE("an http.listen without a host binds loopback, not every interface") {
  auto c = parse_config(kPlain + "http:\n  listen: 9187\n", "t.yaml");
  CHECK(c.http.listen == "9187");
  CHECK(relay::parse_listen_address(c.http.listen).host == "127.0.0.1");
  CHECK(relay::parse_listen_address(c.http.listen).port == 9187);
  CHECK(relay::parse_listen_address(":9187").host == "127.0.0.1");
  CHECK(relay::parse_listen_address("0.0.0.0:9187").host == "0.0.0.0");
  CHECK(relay::parse_listen_address("[::1]:9187").host == "::1");
}

TEST_CASE("bad operations settings name the key and the value") {
  CHECK(contains(config_error(kPlain + "http:\n  listen: 'db.internal:'\n"),
                 "t.yaml:6: http.listen: expected host:port or a port"));
  CHECK(contains(config_error(kPlain + "http:\n  listen: example.com:80\n"),
                 "http.listen: host must be an IP address"));
  CHECK(contains(config_error(kPlain + "http:\n  listen: 127.0.0.1:99999\n"), "http.listen: port must be a number"));
  CHECK(contains(config_error(kPlain + "http:\n  lisen: 1\n"), "http.lisen: unknown key"));
  CHECK(contains(config_error(kPlain + "retention:\n  keep: 7w\n"), "retention.keep: '7w' is not a duration"));
  CHECK(contains(config_error(kPlain + "retention:\n  keep: 30s\n"), "retention.keep: must be at least 1m, got '30s'"));
  CHECK(contains(config_error(kPlain + "retention:\n  enabled: maybe\n"),
                 "retention.enabled: expected true or false, got 'maybe'"));
}

TEST_CASE("require_tls refuses plain connections in the configuration") {
  CHECK(contains(config_error(kPlain + "  require_tls: true\n"),
                 "amqp.require_tls: is true, but amqp.uri is a plain amqp:// URI"));
  auto pg = "postgres:\n  dsn: host=db user=relay\n  require_tls: true\namqp:\n  uri: amqps://relay@mq/%2f\n";
  CHECK(contains(config_error(pg), "postgres.require_tls: is true, but postgres.dsn uses sslmode=prefer"));
  auto ok = parse_config(
      "postgres:\n  dsn: host=db user=relay sslmode=verify-full sslrootcert=/ca.pem\n  require_tls: true\n"
      "amqp:\n  uri: amqps://relay@mq/%2f\n  require_tls: true\n",
      "t.yaml");
  CHECK(ok.postgres.require_tls);
  CHECK(ok.amqp.require_tls);
  CHECK(contains(config_error(kPlain + "  ca_file: /etc/ssl/certs/ca-certificates.crt\n"),
                 "amqp.uri: ca_file, cert_file and key_file need an amqps:// URI"));
  CHECK(contains(config_error("postgres:\n  dsn: x\namqp:\n  uri: amqps://mq/%2f\n  ca_file: /nonexistent/ca.pem\n"),
                 "amqp.ca_file: cannot read '/nonexistent/ca.pem'"));
}

TEST_CASE("${file:PATH} reads a secret file without its trailing newline and never shows it") {
  auto secret = write_temp_file("s3cr3t-from-file\n", ".txt");
  auto c = parse_config("postgres:\n  dsn: host=db password=${file:" + secret +
                            "}\namqp:\n  uri: amqp://u:${file:" + secret + "}@mq/%2f\n",
                        "t.yaml");
  CHECK(c.postgres.dsn == "host=db password=s3cr3t-from-file");
  CHECK(c.amqp.uri == "amqp://u:s3cr3t-from-file@mq/%2f");
  CHECK(inline_warnings(c).empty());  // a reference is not an inline password
  auto e = config_error("postgres:\n  dsn: ${file:/nonexistent/pw}\namqp:\n  uri: amqp://mq/\n");
  CHECK(contains(e, "postgres.dsn: cannot read secret file '/nonexistent/pw'"));
}

TEST_CASE("a password written inline is a warning that names the key and line, not the password") {
  struct Case {
    std::string yaml, key;
  };
  std::vector<Case> cases = {
      {"postgres:\n  dsn: host=db password=hunter2\namqp:\n  uri: amqp://mq/\n", "t.yaml:2: postgres.dsn"},
      {"postgres:\n  dsn: postgresql://relay:hunter2@db/app\namqp:\n  uri: amqp://mq/\n", "t.yaml:2: postgres.dsn"},
      {"postgres:\n  dsn: postgresql://db/app?user=relay&password=hunter2\namqp:\n  uri: amqp://mq/\n",
       "t.yaml:2: postgres.dsn"},
      {"postgres:\n  dsn: host=db\namqp:\n  uri: amqp://guest:hunter2@mq/%2f\n", "t.yaml:4: amqp.uri"},
  };
  for (const auto& c : cases) {
    auto warnings = inline_warnings(parse_config(c.yaml, "t.yaml"));
    REQUIRE(warnings.size() == 1);
    CHECK(contains(warnings[0], c.key + ": a password is written inline"));
    CHECK_FALSE(contains(warnings[0], "hunter2"));
  }
  setenv("OPS_TEST_PW", "from-env", 1);
  auto clean = parse_config(
      "postgres:\n  dsn: host=db password=${OPS_TEST_PW}\n"
      "amqp:\n  uri: amqp://u:${OPS_TEST_PW}@mq/%2f\n",
      "t.yaml");
  CHECK(inline_warnings(clean).empty());
}

TEST_CASE("check-config prints the inline-password warning and still exits 0") {
  auto r = testenv::run_relay_command(
      {"check-config", write_temp_file("postgres:\n  dsn: host=db password=hunter2\namqp:\n  uri: amqp://mq/\n")});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "warning: "));
  CHECK(contains(r.output, "postgres.dsn: a password is written inline"));
  CHECK(contains(r.output, "valid (with warnings)"));
  CHECK_FALSE(contains(r.output, "hunter2"));
}
