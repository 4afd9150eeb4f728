// require_tls and the "not verified" warning, decided on the parameters libpq and
// rabbitmq-c will actually use (PQconninfoParse: the last sslmode wins, quoted
// values stay values; PGSSLMODE when the DSN has none).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "config/config.h"
#include "outbox/pg_conninfo.h"
#include "pg/session_options.h"
#include "test_text.h"

using relay::ConfigError;
using relay::parse_config;

namespace {

using testenv::contains;

std::string config_error(const std::string& yaml) {
  return testenv::error_of<ConfigError>([&] { parse_config(yaml, "t.yaml"); }, "");
}

// postgres.require_tls on, the DSN given (YAML double-quoted), a verified amqps:// URI.
std::string pg_tls(const std::string& dsn) {
  return "postgres:\n  dsn: \"" + dsn +
         "\"\n  require_tls: true\n"
         "amqp:\n  uri: amqps://relay@mq/%2f\n  require_tls: true\n";
}

const char* kRefused = "postgres.require_tls: is true, but postgres.dsn uses sslmode=";

// Unsets PGSSLMODE for a test and restores it after.
struct ScopedPgSslMode {
  explicit ScopedPgSslMode(const char* value) {
    if (const char* old = std::getenv("PGSSLMODE")) saved = old, had = true;
    if (value) setenv("PGSSLMODE", value, 1);
    else unsetenv("PGSSLMODE");
  }
  ~ScopedPgSslMode() {
    if (had) setenv("PGSSLMODE", saved.c_str(), 1);
    else unsetenv("PGSSLMODE");
  }
  std::string saved;
  bool had = false;
};

}  // namespace

TEST_CASE("require_tls looks at the last sslmode of the DSN, as libpq does") {
  ScopedPgSslMode env(nullptr);
  CHECK(contains(config_error(pg_tls("host=db sslmode=verify-full sslmode=require")),
                 std::string(kRefused) + "require"));
  CHECK(contains(config_error(pg_tls("postgresql://db/app?sslmode=verify-full&sslmode=disable")),
                 std::string(kRefused) + "disable"));
  CHECK(config_error(pg_tls("host=db sslmode=require sslmode=verify-full")).empty());
  CHECK(config_error(pg_tls("postgresql://db/app?sslmode=verify-full")).empty());
}

TEST_CASE("an sslmode inside another parameter's quoted value does not count") {
  ScopedPgSslMode env(nullptr);
  CHECK(contains(config_error(pg_tls("host=db application_name='x sslmode=verify-full'")),
                 std::string(kRefused) + "prefer"));
  CHECK(contains(config_error(pg_tls("host=db password='sslmode=verify-full' sslmode=require")),
                 std::string(kRefused) + "require"));
}

TEST_CASE("require_tls accepts only verify-full: verify-ca does not check the host name") {
  ScopedPgSslMode env(nullptr);
  auto e = config_error(pg_tls("host=db sslmode=verify-ca"));
  CHECK(contains(e, std::string(kRefused) + "verify-ca (the certificate's host name is not checked)"));
}

TEST_CASE("PGSSLMODE decides when the DSN has no sslmode, and the DSN's sslmode wins over it") {
  {
    ScopedPgSslMode env("verify-full");
    CHECK(config_error(pg_tls("host=db")).empty());
    CHECK(contains(config_error(pg_tls("host=db sslmode=require")), std::string(kRefused) + "require"));
  }
  {
    ScopedPgSslMode env("require");
    CHECK(contains(config_error(pg_tls("host=db")), std::string(kRefused) + "require"));
    CHECK(config_error(pg_tls("host=db sslmode=verify-full")).empty());
  }
}

TEST_CASE("under require_tls the connection string handed to libpq says verify-full, whatever the environment") {
  ScopedPgSslMode env("verify-full");
  auto c = parse_config(pg_tls("host=db user=relay"), "t.yaml");
  auto final_dsn = outbox::PgConnInfo::parse(relay::dsn_with_session_options(c.postgres));
  CHECK(final_dsn.get("sslmode") == "verify-full");
  c.postgres.require_tls = false;
  CHECK_FALSE(outbox::PgConnInfo::parse(relay::dsn_with_session_options(c.postgres)).get("sslmode"));
}

TEST_CASE("amqp.require_tls refuses a plain URI and a broker certificate whose host name is not checked") {
  ScopedPgSslMode env(nullptr);
  const std::string pg = "postgres:\n  dsn: host=db sslmode=verify-full\n  require_tls: true\n";
  CHECK(contains(config_error(pg + "amqp:\n  uri: amqp://relay@mq/%2f\n  require_tls: true\n"),
                 "amqp.require_tls: is true, but amqp.uri is a plain amqp:// URI"));
  auto e = config_error(pg + "amqp:\n  uri: amqps://relay@mq/%2f\n  require_tls: true\n  verify_hostname: false\n");
  CHECK_MESSAGE(contains(e, "t.yaml:7: amqp.verify_hostname: is false, but amqp.require_tls is true"), e);
  CHECK(config_error(pg + "amqp:\n  uri: amqps://relay@mq/%2f\n  require_tls: true\n").empty());
}

TEST_CASE("without require_tls one warning names each connection whose server is not verified, never a secret") {
  ScopedPgSslMode env(nullptr);
  auto warning_of = [](const std::string& yaml) {
    auto c = parse_config(yaml, "t.yaml");
    std::string all;
    for (const auto& w : c.warnings)
      if (contains(w, "not verified")) all += w + "\n";
    return all;
  };
  setenv("TLS_TEST_PW", "hunter2-secret", 1);
  auto both = warning_of(
      "postgres:\n  dsn: host=db password=${TLS_TEST_PW} sslmode=require\n"
      "amqp:\n  uri: amqp://u:${TLS_TEST_PW}@mq/%2f\n");
  CHECK(std::count(both.begin(), both.end(), '\n') == 1);
  CHECK(contains(both, "postgres (sslmode=require) and amqp (plain amqp://)"));
  CHECK_FALSE(contains(both, "hunter2"));
  CHECK(contains(warning_of("postgres:\n  dsn: host=db sslmode=verify-full\n"
                            "amqp:\n  uri: amqps://u@mq/%2f\n  verify_hostname: false\n"),
                 "not verified for amqp (verify_hostname: false)"));
  CHECK(contains(warning_of("postgres:\n  dsn: host=db sslmode=verify-ca\namqp:\n  uri: amqps://u@mq/%2f\n"),
                 "not verified for postgres (sslmode=verify-ca)"));
  CHECK(warning_of("postgres:\n  dsn: host=db sslmode=verify-full\namqp:\n  uri: amqps://u@mq/%2f\n").empty());
  unsetenv("TLS_TEST_PW");
}
