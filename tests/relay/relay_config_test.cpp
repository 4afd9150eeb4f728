#include <doctest/doctest.h>

#include <cstdlib>

#include "config.h"

using relay::ConfigError;
using relay::parse_config;

namespace {

const std::string kValid =
    "postgres:\n"
    "  dsn: host=db user=relay password=${TEST_PG_SECRET}\n"
    "  schema: outbox\n"
    "amqp:\n"
    "  uri: amqp://relay:hunter2@mq:5672/\n"
    "  heartbeat_s: 10\n"
    "  confirm_timeout_ms: 20000\n"
    "relay:\n"
    "  batch_size: 250\n"
    "  backoff_factor: 1.5\n";

// The ConfigError message for `yaml`, or "(accepted)".
std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "relay.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

struct SecretEnv {
  SecretEnv() { setenv("TEST_PG_SECRET", "s3cr3t-value", 1); }
  ~SecretEnv() { unsetenv("TEST_PG_SECRET"); }
};

}  // namespace

TEST_CASE("a valid file is parsed with defaults for what it leaves out and ${ENV} expanded") {
  SecretEnv env;
  auto c = parse_config(kValid, "relay.yaml");
  CHECK(c.postgres.dsn == "host=db user=relay password=s3cr3t-value");
  CHECK(c.amqp.heartbeat_s == 10);
  CHECK(c.relay.batch_size == 250);
  CHECK(c.relay.backoff_factor == doctest::Approx(1.5));
  CHECK(c.relay.max_attempts == 10);          // default
  CHECK(c.amqp.publish_window == 1024);       // default
  CHECK(c.log.level == "info");               // default
}

TEST_CASE("malformed YAML names the file and line") {
  auto e = error_of("postgres:\n  dsn: [unclosed\n");
  CHECK(contains(e, "relay.yaml:"));
  CHECK(contains(e, "malformed YAML"));
}

TEST_CASE("an unknown key is an error naming its path and line") {
  SecretEnv env;
  auto e = error_of(replace(kValid, "  batch_size: 250\n", "  batch_size: 250\n  bach_size: 3\n"));
  CHECK(contains(e, "relay.bach_size: unknown key"));
  CHECK(contains(e, "relay.yaml:10:"));
  CHECK(contains(error_of(kValid + "extra:\n  a: 1\n"), "extra: unknown section"));
}

TEST_CASE("a wrong type is an error naming the key and the value") {
  SecretEnv env;
  auto e = error_of(replace(kValid, "batch_size: 250", "batch_size: lots"));
  CHECK(contains(e, "relay.yaml:9: relay.batch_size: expected an integer, got 'lots'"));
  CHECK(contains(error_of(replace(kValid, "backoff_factor: 1.5", "backoff_factor: [1]")),
                 "relay.backoff_factor: expected a number"));
  CHECK(contains(error_of(replace(kValid, "schema: outbox", "schema: {a: 1}")),
                 "postgres.schema: expected a string, got a mapping"));
}

TEST_CASE("zero or negative sizes are out of range, with the allowed range in the message") {
  SecretEnv env;
  CHECK(contains(error_of(replace(kValid, "batch_size: 250", "batch_size: 0")),
                 "relay.batch_size: must be between 1 and 100000, got 0"));
  CHECK(contains(error_of(replace(kValid, "batch_size: 250", "batch_size: -5")),
                 "relay.batch_size: must be between 1 and 100000, got -5"));
}

TEST_CASE("a confirm timeout shorter than the heartbeat is refused") {
  SecretEnv env;
  auto e = error_of(replace(kValid, "confirm_timeout_ms: 20000", "confirm_timeout_ms: 5000"));
  CHECK(contains(e, "amqp.confirm_timeout_ms: must be at least amqp.heartbeat_s"));
}

TEST_CASE("an idle-in-transaction timeout not above the confirm timeout is refused") {
  SecretEnv env;
  auto e = error_of(replace(kValid, "  schema: outbox\n", "  schema: outbox\n  idle_in_transaction_timeout_ms: 20000\n"));
  CHECK(contains(e, "postgres.idle_in_transaction_timeout_ms: must exceed amqp.confirm_timeout_ms"));
}

TEST_CASE("a missing required key or section is named") {
  SecretEnv env;
  CHECK(contains(error_of("amqp:\n  uri: amqp://x/\n"), "postgres: section is required"));
  CHECK(contains(error_of(replace(kValid, "  dsn: host=db user=relay password=${TEST_PG_SECRET}\n", "")),
                 "postgres.dsn: is required"));
  CHECK(contains(error_of(""), "the file is empty"));
}

TEST_CASE("an unset environment variable is named, and secrets never appear in errors") {
  auto e = error_of(kValid);  // TEST_PG_SECRET unset
  CHECK(contains(e, "postgres.dsn: environment variable 'TEST_PG_SECRET' is not set"));
  SecretEnv env;
  auto bad_uri = error_of(replace(kValid, "uri: amqp://relay:hunter2@mq:5672/", "uri: http://relay:hunter2@mq/"));
  CHECK(contains(bad_uri, "amqp.uri: must start with amqp:// or amqps://"));
  CHECK_FALSE(contains(bad_uri, "hunter2"));
  auto bad_type = error_of(replace(kValid, "heartbeat_s: 10", "heartbeat_s: ten"));
  CHECK_FALSE(contains(bad_type, "hunter2"));
  CHECK_FALSE(contains(bad_type, "s3cr3t"));
}

TEST_CASE("hostile schema names are refused with the value shown") {
  SecretEnv env;
  for (std::string bad : {"\"x; DROP TABLE y\"", "'Outbox'", "\"schéma\""}) {
    auto e = error_of(replace(kValid, "schema: outbox", "schema: " + bad));
    CHECK_MESSAGE(contains(e, "postgres.schema: "), e);
    CHECK_MESSAGE(contains(e, "not a plain identifier"), e);
  }
}

TEST_CASE("a malformed PostgreSQL DSN is refused, naming the key and never the password") {
  SecretEnv env;
  auto with_dsn = [&](const std::string& dsn) {
    return error_of(replace(kValid, "dsn: host=db user=relay password=${TEST_PG_SECRET}", "dsn: \"" + dsn + "\""));
  };
  CHECK(contains(with_dsn("host=db port=notaport password=${TEST_PG_SECRET}"),
                 "relay.yaml:2: postgres.dsn: port 'notaport' is not a number from 1 to 65535"));
  CHECK(contains(with_dsn("host=db port=70000"), "postgres.dsn: port '70000' is not a number"));
  CHECK(contains(with_dsn("host=db hots=x password=${TEST_PG_SECRET}"),
                 "postgres.dsn: not a valid libpq connection string or URI: invalid connection option \"hots\""));
  for (std::string bad : {"host=db password ${TEST_PG_SECRET}", "postgresql://relay:${TEST_PG_SECRET}%zz@db/app",
                          "postgresql://relay:${TEST_PG_SECRET}@[::1/app", "host='${TEST_PG_SECRET}"}) {
    auto e = with_dsn(bad);
    CHECK_MESSAGE(contains(e, "postgres.dsn: not a valid libpq connection string or URI: "), e);
    CHECK_MESSAGE(!contains(e, "s3cr3t"), e);
  }
  CHECK(parse_config(replace(kValid, "host=db", "host=db port=5433,5434"), "relay.yaml").postgres.dsn.find("5433") !=
        std::string::npos);
}

TEST_CASE("a malformed AMQP URI is refused without showing it") {
  SecretEnv env;
  for (std::string bad : {"amqp://relay:hunter2@mq:notaport/", "amqp://relay:hunter2@mq:99999/",
                          "amqp://relay:hunter2@[::1/", "amqp://relay:hunter2@mq/a/b"}) {
    auto e = error_of(replace(kValid, "uri: amqp://relay:hunter2@mq:5672/", "uri: \"" + bad + "\""));
    CHECK_MESSAGE(contains(e, "relay.yaml:5: amqp.uri: not a valid amqp://user:password@host:port/vhost URI"), e);
    CHECK_MESSAGE(!contains(e, "hunter2"), e);
  }
}

TEST_CASE("backoff maximum below the initial delay is refused") {
  SecretEnv env;
  auto e = error_of(replace(kValid, "  batch_size: 250\n",
                            "  batch_size: 250\n  backoff_initial_ms: 5000\n  backoff_max_ms: 100\n"));
  CHECK(contains(e, "relay.backoff_max_ms: must be at least relay.backoff_initial_ms"));
}

TEST_CASE("log level and format take only known words") {
  SecretEnv env;
  CHECK(contains(error_of(kValid + "log:\n  level: loud\n"), "log.level: must be one of"));
  CHECK(contains(error_of(kValid + "log:\n  format: xml\n"), "log.format: must be one of"));
}

TEST_CASE("pipelining and listening settings have defaults, ranges and a type check") {
  SecretEnv env;
  auto c = parse_config(kValid, "relay.yaml");
  CHECK(c.relay.pipeline_depth == 2);
  CHECK(c.relay.listen);
  CHECK(c.relay.listen_poll_interval_ms == 5000);
  CHECK_FALSE(c.postgres.synchronous_commit);
  CHECK(parse_config(replace(kValid, "  schema: outbox\n", "  schema: outbox\n  synchronous_commit: true\n"),
                     "relay.yaml").postgres.synchronous_commit);
  auto set = replace(kValid, "  batch_size: 250\n",
                     "  batch_size: 250\n  pipeline_depth: 1\n  listen: false\n  listen_poll_interval_ms: 900\n");
  c = parse_config(set, "relay.yaml");
  CHECK(c.relay.pipeline_depth == 1);
  CHECK_FALSE(c.relay.listen);
  CHECK(c.relay.listen_poll_interval_ms == 900);
  CHECK(contains(error_of(replace(kValid, "batch_size: 250", "batch_size: 250\n  pipeline_depth: 9")),
                 "relay.pipeline_depth: must be between 1 and 8, got 9"));
  CHECK(contains(error_of(replace(kValid, "batch_size: 250", "batch_size: 250\n  listen_poll_interval_ms: 5")),
                 "relay.listen_poll_interval_ms: must be between 100 and 3600000, got 5"));
  CHECK(contains(error_of(replace(kValid, "batch_size: 250", "batch_size: 250\n  listen: sometimes")),
                 "relay.listen: expected"));
}
