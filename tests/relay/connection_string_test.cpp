// Connection strings as the drivers read them: libpq's parse of postgres.dsn, the
// keyword string the relay rebuilds from it, the syntax checks' messages and the
// scrubbing of passwords out of driver errors. No byte of a password may leak.
#include <doctest/doctest.h>

#include <cctype>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/endpoint_syntax.h"
#include "outbox/pg_connection.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pg_dsn_check.h"
#include "outbox/secret_scrubber.h"
#include "pg/session_options.h"
#include "test_env.h"
#include "test_text.h"

using outbox::PgConnInfo;
using outbox::SecretScrubber;

namespace {

using testenv::contains;

// Every piece of `secret` of 4 bytes or more that occurs in `text` (empty: none).
std::string leaked_fragment(const std::string& text, const std::string& secret) {
  for (std::size_t i = 0; i + 4 <= secret.size(); ++i)
    if (contains(text, secret.substr(i, 4))) return secret.substr(i, 4);
  return "";
}

const std::vector<std::string> kPasswords = {"Zq7@:/TOPSECRETPART%?#Wx@:9", "@:/%?#@:/%?#", "sp ace'quo\"te\\Kx@:/"};

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
  CHECK(final_dsn.get("tcp_user_timeout") == "10000");  // a half-open session ends in seconds
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
  for (const auto& pw :
       {std::string("Zq7@TOPSECRETPART"), std::string("Zq7/TOPSECRETPART"), std::string("Zq7?TOPSECRETPART")}) {
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

// Stands in for a connection class: libpq's error texts quote the conninfo it was
// given, so each throw carries the whole keyword string (the password with it).
template <int kind>
struct FailingConnection {
  explicit FailingConnection(const std::string& conninfo) {
    if (kind == 0) throw pqxx::sql_error("FATAL: role refused; " + conninfo, "", "28P01");
    if (kind == 1) throw pqxx::broken_connection("could not translate host name in " + conninfo);
    throw pqxx::failure("failed: " + conninfo);
  }
};

TEST_CASE(
    "any connection class opened through open_pg_connection_as fails as the same pqxx type, without the password") {
  const std::string pw = "Zq7@:/TOPSECRETPART%?#Wx";
  const auto dsn = "postgresql://relay:" + testenv::percent_encoded(pw) + "@db.example/app";
  const auto open_error = [](auto open) { return testenv::error_of<std::exception>(open, "nothing thrown"); };
  auto text = open_error([&] { outbox::open_pg_connection_as<FailingConnection<0>>(dsn); });
  CHECK_MESSAGE(leaked_fragment(text, pw).empty(), text);
  CHECK_MESSAGE(contains(text, "host='db.example'"), text);  // the rest of the error stays
  try {
    outbox::open_pg_connection_as<FailingConnection<0>>(dsn);
  } catch (const pqxx::sql_error& e) {
    CHECK(e.sqlstate() == "28P01");
  }
  CHECK_THROWS_AS(outbox::open_pg_connection_as<FailingConnection<1>>(dsn), pqxx::broken_connection);
  text = open_error([&] { outbox::open_pg_connection_as<FailingConnection<1>>(dsn); });
  CHECK_MESSAGE(leaked_fragment(text, pw).empty(), text);
  CHECK_THROWS_AS(outbox::open_pg_connection_as<FailingConnection<2>>(dsn), pqxx::failure);
  text = open_error([&] { outbox::open_pg_connection_as<FailingConnection<2>>(dsn); });
  CHECK_MESSAGE(leaked_fragment(text, pw).empty(), text);
}

TEST_CASE("an option name libpq does not know is not shown, since it may be a piece of a password") {
  for (const auto& dsn :
       {std::string("host=db password=Xk9 mPq2=TOPSECRET"), std::string("postgresql://relay@db/app?mPq2TOPSECRET=1")}) {
    CAPTURE(dsn);
    auto why = outbox::pg_dsn_syntax_error(dsn);
    REQUIRE(why);
    CHECK_MESSAGE(leaked_fragment(*why, "mPq2TOPSECRET").empty(), *why);
    CHECK_MESSAGE(contains(*why, "(not shown: it may be part of a password"), *why);
  }
}

TEST_CASE("a URI whose password holds a raw '@', '/', '?' or '#' is refused before libpq splits it, showing no part") {
  for (const auto& dsn :
       {std::string("postgresql://postgres:a/b?TOPSECRETPART=1@127.0.0.1:36432/postgres"),
        std::string("postgresql://postgres:Zq@secrethost?application_name=y@127.0.0.1:36432/postgres"),
        std::string("postgres://relay:Zq#TOPSECRETPART@db/app"),
        std::string("postgresql://relay:Zq?TOPSECRETPART@db/app")}) {
    CAPTURE(dsn);
    auto why = outbox::pg_dsn_syntax_error(dsn);
    REQUIRE(why);
    CHECK_MESSAGE(leaked_fragment(*why, "TOPSECRETPART").empty(), *why);
    CHECK_MESSAGE(!contains(*why, "secrethost"), *why);
    CHECK_MESSAGE(contains(*why, "percent-encode"), *why);
  }
  // One '@' after the user, and '@' percent-encoded in a query value, are fine.
  CHECK_FALSE(outbox::pg_dsn_syntax_error("postgresql://relay:pw@db:5432/app?application_name=a%40b"));
  CHECK_FALSE(outbox::pg_dsn_syntax_error("postgresql://db/app?host=/var/run/postgresql"));
}

namespace {

// expand_conninfo_template with ${S} standing for `secret` and ${DSN} for `whole`.
std::string expanded(const std::string& tmpl, const std::string& secret, const std::string& whole = "") {
  return outbox::expand_conninfo_template(tmpl, [&](const std::string& name) { return name == "S" ? secret : whole; });
}

}  // namespace

TEST_CASE("a ${...} password in a keyword DSN reaches libpq whole, whatever characters it holds") {
  for (const auto& pw : {std::string("Xk9 mPq2=TOPSECRET"), std::string("sp ace'quo\"te\\Kx@:/"),
                         std::string("'leading quote"), std::string(" "), std::string("")}) {
    CAPTURE(pw);
    for (const auto& tmpl : {std::string("host=db password=${S} user=relay"), std::string("host=db password = ${S}"),
                             std::string("password=${S}\tuser=relay host=db")}) {
      const auto dsn = expanded(tmpl, pw);
      REQUIRE_FALSE(outbox::pg_dsn_syntax_error(dsn));
      auto info = PgConnInfo::parse(dsn);
      CHECK(info.get("password") == pw);
      CHECK(info.get("host") == "db");
    }
    CHECK(PgConnInfo::parse(expanded("password=pre${S}\\ post", pw)).get("password") == "pre" + pw + " post");
  }
  // A reference that is the whole string, or a key, or part of a URI is inserted as is.
  CHECK(expanded("${DSN}", "", "host=db user=relay") == "host=db user=relay");
  CHECK(expanded("postgresql://relay:${S}@db/app", "pa%20ss") == "postgresql://relay:pa%20ss@db/app");
  // Without a reference the string is left alone.
  CHECK(expanded("host=db password=it\\'s", "") == "host=db password=it\\'s");
}

TEST_CASE("a ${...} inside quotes the DSN writes itself must be escaped already, or is refused unseen") {
  CHECK(PgConnInfo::parse(expanded("host=db password='${S}'", "it\\'s a\\\\b")).get("password") == "it's a\\b");
  for (const auto& pw : {std::string("TOPS' host=evil"), std::string("TOPSECRET\\")}) {
    CAPTURE(pw);
    try {
      expanded("host=db password='${S}'", pw);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK_MESSAGE(leaked_fragment(e.what(), pw).empty(), e.what());
      CHECK(contains(e.what(), "${S} is inside a quoted value"));
    }
  }
}
