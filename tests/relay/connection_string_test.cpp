// Connection strings as the drivers read them: libpq's parse of postgres.dsn, the
// keyword string the relay rebuilds from it, the syntax checks' messages and the
// scrubbing of passwords out of driver errors. No byte of a password may leak.
#include <doctest/doctest.h>

#include <cctype>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/endpoint_syntax.h"
#include "publish/outbox_store.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pg_dsn_check.h"
#include "outbox/secret_scrubber.h"
#include "test_env.h"

using outbox::PgConnInfo;
using outbox::SecretScrubber;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every piece of `secret` of 4 bytes or more that occurs in `text` (empty: none).
std::string leaked_fragment(const std::string& text, const std::string& secret) {
  for (std::size_t i = 0; i + 4 <= secret.size(); ++i)
    if (contains(text, secret.substr(i, 4))) return secret.substr(i, 4);
  return "";
}

const std::vector<std::string> kPasswords = {"Zq7@:/TOPSECRETPART%?#Wx@:9", "@:/%?#@:/%?#",
                                             "sp ace'quo\"te\\Kx@:/"};

}  // namespace

TEST_CASE("a percent-encoded password full of @:/%?# reaches libpq whole, in URI and keyword form") {
  for (const auto& pw : kPasswords) {
    CAPTURE(pw);
    for (const auto& dsn : {"postgresql://relay:" + testenv::percent_encoded(pw) + "@db.example:6432/app",
                            "host=db.example port=6432 dbname=app user=relay password=" + testenv::single_quoted(pw)}) {
      CHECK_FALSE(outbox::pg_dsn_syntax_error(dsn));
      auto info = outbox::PgConnInfo::parse(dsn);
      CHECK(info.get("password") == pw);
      CHECK(info.get("host") == "db.example");
      CHECK(info.get("port") == "6432");
      // The string the relay connects with holds the same parameters, plus its own.
      relay::PostgresConfig c;
      c.dsn = dsn;
      auto final_dsn = outbox::PgConnInfo::parse(relay::dsn_with_session_options(c));
      CHECK(final_dsn.get("password") == pw);
      CHECK(final_dsn.get("host") == "db.example");
      CHECK(final_dsn.get("dbname") == "app");
      CHECK(final_dsn.get("connect_timeout") == "5");
      CHECK(final_dsn.get("application_name") == "outbox-relay");
    }
  }
}

TEST_CASE("the user's session options win, and a value that looks like a keyword is only a value") {
  relay::PostgresConfig c;
  c.dsn = "host=db application_name=billing password='connect_timeout=99 keepalives=0'";
  auto final_dsn = outbox::PgConnInfo::parse(relay::dsn_with_session_options(c));
  CHECK(final_dsn.get("application_name") == "billing");
  CHECK(final_dsn.get("connect_timeout") == "5");
  CHECK(final_dsn.get("keepalives") == "1");
  CHECK(final_dsn.get("password") == "connect_timeout=99 keepalives=0");
}

TEST_CASE("a URI whose password holds a raw @, : or / is refused without a byte of the password") {
  for (const auto& pw : {std::string("Zq7@x:TOPSECRETPART"), std::string("Zq7x@TOPSECRETPART"),
                         std::string("Zq7/TOPSECRETPART@x"), std::string("Zq7x:TOPSECRETPART")}) {
    CAPTURE(pw);
    for (const auto& port : {std::string(":39432"), std::string("")}) {
      const auto dsn = "postgresql://relay:" + pw + "@127.0.0.1" + port + "/app";
      auto why = outbox::pg_dsn_syntax_error(dsn);
      if (pw == "Zq7x:TOPSECRETPART") {
        CHECK_FALSE(why);  // only the first ':' separates user and password
        continue;
      }
      REQUIRE(why);
      CHECK_MESSAGE(leaked_fragment(*why, pw).empty(), *why);
      CHECK(contains(*why, "percent-encode"));
    }
  }
}

TEST_CASE("a keyword DSN's bad port is shown, scrubbed of the password") {
  auto why = outbox::pg_dsn_syntax_error("host=db port=5432x password=TOPSECRET");
  REQUIRE(why);
  CHECK(contains(*why, "port '5432x' is not a number from 1 to 65535"));
  why = outbox::pg_dsn_syntax_error("host=db port=TOPSECRET password=TOPSECRET");
  REQUIRE(why);
  const bool hidden = !contains(*why, "TOPS") && !contains(*why, "SECRET");
  CHECK_MESSAGE(hidden, *why);
}

TEST_CASE("an sslmode libpq does not know is a configuration error, not a connection retried forever") {
  auto why = outbox::pg_dsn_syntax_error("host=db sslmode=verify_full");
  REQUIRE(why);
  CHECK(*why == "sslmode 'verify_full' is not one of disable, allow, prefer, require, verify-ca, verify-full");
  CHECK_FALSE(outbox::pg_dsn_syntax_error("postgresql://db/app?sslmode=verify-full"));
}

TEST_CASE("an AMQP URI is read with its percent-encoding; a raw @ or / in the password is refused unseen") {
  for (const auto& pw : kPasswords)
    CHECK_FALSE(relay::amqp_uri_syntax_error("amqp://relay:" + testenv::percent_encoded(pw) + "@mq.example:5672/%2f"));
  for (const auto& pw : {std::string("Zq7@TOPSECRETPART"), std::string("Zq7/TOPSECRETPART"),
                         std::string("Zq7?TOPSECRETPART")}) {
    auto why = relay::amqp_uri_syntax_error("amqp://relay:" + pw + "@mq.example:5672/%2f");
    REQUIRE(why);
    CHECK(leaked_fragment(*why, pw).empty());
  }
}

TEST_CASE("the scrubber hides a password and every 4-byte piece of it, and nothing else") {
  outbox::SecretScrubber scrub({"Zq7@:/TOPSECRET"});
  CHECK(scrub.scrub("could not translate host name \"TOPSECRET@127.0.0.1\" to address") ==
        "could not translate host name \"[redacted]@127.0.0.1\" to address");
  CHECK(scrub.scrub("x Zq7@:/TOPSECRET y") == "x [redacted] y");
  CHECK(scrub.scrub("port 'Zq7@' and 'CRET'") == "port '[redacted]' and '[redacted]'");
  CHECK(scrub.scrub("connection refused on Zq7 port 1") == "connection refused on Zq7 port 1");
  CHECK(outbox::SecretScrubber({"ab"}).scrub("ab cab") == "[redacted] c[redacted]");
  CHECK(outbox::SecretScrubber({""}).scrub("text") == "text");
}
