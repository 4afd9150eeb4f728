// PgSession: the relay's own libpq session. Raw bytes and binary numbers from its
// statements, the same exceptions libpqxx throws (so the relay classifies its
// failures as any other), pipelines that leave the session usable, and a connect
// error that never holds the password.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "outbox/pg_conninfo.h"
#include "pg/pg_session.h"
#include "pg_error_kind.h"
#include "test_env.h"

using relay::PgSession;
using testenv::ScopedSchema;

namespace {

std::string every_byte_twice() {
  std::string s;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s;
}

std::string server_state(PgSession& session) {
  return testenv::sql_value("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(session.backend_pid()));
}

}  // namespace

TEST_CASE("rows come back as raw bytes and bigints, inside the transaction that wrote them") {
  ScopedSchema schema;
  const std::string table = "\"" + schema.name() + "\".blobs";
  PgSession session(testenv::pg_dsn());
  session.exec("CREATE TABLE " + table + " (id bigint PRIMARY KEY, body bytea)");
  session.exec("BEGIN");
  const std::string bytes = every_byte_twice();
  // Parameters go as text: a bytea in its hex form.
  auto hex = [](const std::string& b) {
    static const char* digits = "0123456789abcdef";
    std::string out = "\\x";
    for (unsigned char c : b) out += {digits[c >> 4], digits[c & 15]};
    return out;
  };
  session.exec("INSERT INTO " + table + " VALUES (-7, $1), (4294967297, $2), (3, NULL)",
               {hex(bytes), hex(std::string(200 * 1024, '\\'))});
  // Not committed: only this transaction sees the rows.
  const auto q = session.exec("SELECT id, body FROM " + table + " WHERE id = ANY($1::bigint[]) ORDER BY id",
                              {"{-7,3,4294967297}"});
  REQUIRE(q.rows() == 3);
  REQUIRE(q.columns() == 2);
  CHECK(q.int8(0, 0) == -7);
  CHECK(q.bytes(0, 1) == bytes);
  CHECK(q.int8(1, 0) == 3);
  CHECK(q.is_null(1, 1));
  CHECK(q.int8(2, 0) == 4294967297LL);
  CHECK(q.bytes(2, 1) == std::string(200 * 1024, '\\'));
  CHECK(relaytest::pg_error_kind([&] { q.int8(0, 1); }) == relay::PgError::Kind::kUsage);  // a bytea is not a bigint
  CHECK(testenv::sql_value("SELECT count(*) FROM " + table) == "0");
  session.exec("COMMIT");
  CHECK(testenv::sql_value("SELECT count(*) FROM " + table) == "3");
}

TEST_CASE("text results, affected rows and command tags are as the server sent them") {
  ScopedSchema schema;
  const std::string table = "\"" + schema.name() + "\".t";
  PgSession session(testenv::pg_dsn());
  session.exec("CREATE TABLE " + table + " (n int)");
  CHECK(session.exec("INSERT INTO " + table + " SELECT generate_series(1, 5)").affected_rows() == 5);
  const auto updated = session.exec("UPDATE " + table + " SET n = n + 1 WHERE n > $1", {"2"});
  CHECK(updated.affected_rows() == 3);
  CHECK(updated.command_tag() == "UPDATE 3");
  const auto text = session.exec("SELECT sum(n)::text, 1.5::numeric FROM " + table, {}, PgSession::Format::kText);
  CHECK(text.bytes(0, 0) == "18");
  CHECK(text.bytes(0, 1) == "1.5");
}

TEST_CASE(
    "an SQL error is a refused statement (PgError) with its SQLSTATE on one line, and it aborts the transaction") {
  ScopedSchema schema;
  PgSession session(testenv::pg_dsn());
  session.exec("BEGIN");
  try {
    session.exec("SELECT id FROM \"" + schema.name() + "\".no_such_table WHERE id = $1", {"1"});
    FAIL("no error");
  } catch (const relay::PgError& e) {
    CHECK(e.sqlstate() == "42P01");
    CHECK(std::string(e.what()).find("no_such_table") != std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line, for the log
  }
  CHECK(server_state(session) == "idle in transaction (aborted)");
  CHECK(relaytest::pg_error_kind([&] { session.exec("SELECT 1"); }) == relay::PgError::Kind::kStatement);  // 25P02
  session.exec("ROLLBACK");
  CHECK(session.exec("SELECT 1::int").int4(0, 0) == 1);
}

TEST_CASE("a session that is gone is a lost session (PgError), and says it is not open") {
  PgSession session(testenv::pg_dsn());
  REQUIRE(session.is_open());
  testenv::sql_value("SELECT pg_terminate_backend(" + std::to_string(session.backend_pid()) + ")");
  CHECK(relaytest::pg_error_kind([&] { session.exec("SELECT $1::bigint", {"1"}); }) ==
        relay::PgError::Kind::kSessionLost);
  CHECK_FALSE(session.is_open());
  CHECK(relaytest::pg_error_kind([&] { session.exec("SELECT 1"); }) == relay::PgError::Kind::kSessionLost);
}

TEST_CASE("a connect error is a lost session (PgError) that never holds the password") {
  const std::string password = "Sekr3t@p4ss:w/o%rd' \\x";  // @ : / % quote space backslash
  auto info = outbox::PgConnInfo::parse(testenv::pg_dsn());
  info.set("user", "no_such_role_" + password);  // libpq quotes the user in its error
  info.set("password", password);
  try {
    PgSession session(info.to_string());
    FAIL("connected");
  } catch (const relay::PgError& e) {
    const std::string what = e.what();
    CHECK(what.find("no_such_role_") != std::string::npos);
    CHECK(what.find(password) == std::string::npos);
    CHECK(what.find("Sekr") == std::string::npos);  // no 4-byte fragment either
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK(relaytest::pg_error_kind([&] { PgSession("host=127.0.0.1 port=1 connect_timeout=2"); }) ==
        relay::PgError::Kind::kSessionLost);
}

TEST_CASE("a prepared statement returns integers, doubles, booleans, tids and text by column name") {
  PgSession session(testenv::pg_dsn());
  session.prepare("binary_kinds",
                  "SELECT $1::int AS n, date_part('epoch', $2::timestamptz) AS t, $3::bool AS b, "
                  "$4::text AS s, NULL::int AS missing, '(4294967295,65535)'::tid AS far, "
                  "'(0,1)'::tid AS first");
  session.exec("BEGIN");
  const auto q = session.exec_prepared("binary_kinds",
                                       {"-2147483648", "2026-12-01 12:00:00.25+00", "true", "caf\xC3\xA9"});
  REQUIRE(q.rows() == 1);
  CHECK(q.int4(0, q.column("n")) == -2147483648LL);
  CHECK(q.float8(0, q.column("t")) == doctest::Approx(1796126400.25).epsilon(1e-12));
  CHECK(q.boolean(0, q.column("b")));
  CHECK(q.bytes(0, q.column("s")) == "caf\xC3\xA9");
  CHECK(q.tid(0, q.column("far")) == "(4294967295,65535)");  // unsigned block and offset
  CHECK(q.tid(0, q.column("first")) == "(0,1)");
  CHECK(relaytest::pg_error_kind([&] { q.tid(0, q.column("n")); }) == relay::PgError::Kind::kUsage);
  CHECK(relaytest::pg_error_kind([&] { q.int4(0, q.column("missing")); }) ==
        relay::PgError::Kind::kUsage);  // NULL is not a number
  CHECK(relaytest::pg_error_kind([&] { q.float8(0, q.column("n")); }) ==
        relay::PgError::Kind::kUsage);  // 4 bytes are not a double
  CHECK(relaytest::pg_error_kind([&] { q.boolean(0, q.column("s")); }) == relay::PgError::Kind::kUsage);
  CHECK(relaytest::pg_error_kind([&] { q.column("nope"); }) == relay::PgError::Kind::kUsage);
  // The statement lives on the session, past the transaction.
  session.exec("COMMIT");
  CHECK(session.exec_prepared("binary_kinds", {"7", "1970-01-01 00:00:01+00", "false", ""}).int4(0, 0) == 7);
}

TEST_CASE("preparing a statement that does not compile is a refused statement (PgError) naming the problem") {
  ScopedSchema schema;
  PgSession session(testenv::pg_dsn());
  try {
    session.prepare("broken", "SELECT id FROM \"" + schema.name() + "\".no_such_table");
    FAIL("no error");
  } catch (const relay::PgError& e) {
    CHECK(e.sqlstate() == "42P01");
    CHECK(std::string(e.what()).find("no_such_table") != std::string::npos);
  }
  CHECK(relaytest::pg_error_kind([&] { session.exec_prepared("broken", {}); }) == relay::PgError::Kind::kStatement);
}

TEST_CASE("BEGIN travels with a statement and COMMIT after one: each in one pipeline, the session idle after") {
  ScopedSchema schema;
  const std::string table = "\"" + schema.name() + "\".t";
  PgSession session(testenv::pg_dsn());
  session.exec("CREATE TABLE " + table + " (n int)");
  session.prepare("insert_n", "INSERT INTO " + table + " VALUES ($1::int) RETURNING n");
  session.prepare("double_n", "UPDATE " + table + " SET n = n * 2");
  const auto inserted = session.begin_then("insert_n", {"21"});
  CHECK(inserted.int4(0, 0) == 21);
  CHECK(server_state(session) == "idle in transaction");
  CHECK(testenv::sql_value("SELECT count(*) FROM " + table) == "0");  // not committed yet
  CHECK(session.exec_then_commit("double_n", {}) == 1);
  CHECK(server_state(session) == "idle");
  CHECK(testenv::sql_value("SELECT n FROM " + table) == "42");
  // A failing statement in the COMMIT pipeline: no COMMIT ran, the transaction is
  // aborted for its owner to roll back, and the session is usable after.
  session.begin_then("insert_n", {"1"});
  CHECK(relaytest::pg_error_kind([&] { session.exec_then_commit("insert_n", {"not a number"}); }) ==
        relay::PgError::Kind::kStatement);
  CHECK(server_state(session) == "idle in transaction (aborted)");
  session.exec("ROLLBACK");
  CHECK(testenv::sql_value("SELECT count(*) FROM " + table) == "1");
  // A failing BEGIN-pipeline statement leaves its transaction aborted likewise.
  CHECK(relaytest::pg_error_kind([&] { session.begin_then("insert_n", {"x"}); }) == relay::PgError::Kind::kStatement);
  CHECK(server_state(session) == "idle in transaction (aborted)");
  session.exec("ROLLBACK");
  CHECK(session.exec("SELECT 2::int").int4(0, 0) == 2);
}
