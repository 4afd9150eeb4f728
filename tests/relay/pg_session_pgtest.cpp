// PgBinaryQuery: raw bytes from the claim's own session and transaction, and the
// same exceptions libpqxx throws, so the relay classifies its failures as any other.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "publish/pg_binary_query.h"
#include "test_env.h"

using relay::PgBinaryQuery;
using testenv::ScopedSchema;

namespace {

std::string every_byte_twice() {
  std::string s;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s;
}

}  // namespace

TEST_CASE("rows come back as raw bytes and bigints, inside the transaction that wrote them") {
  ScopedSchema schema;
  const std::string table = "\"" + schema.name() + "\".blobs";
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction(conn).exec0("CREATE TABLE " + table + " (id bigint PRIMARY KEY, body bytea)");
  pqxx::work tx(conn);
  const std::string bytes = every_byte_twice();
  tx.exec_params0("INSERT INTO " + table + " VALUES (-7, $1), (4294967297, $2), (3, NULL)", pqxx::binarystring(bytes),
                  pqxx::binarystring(std::string(200 * 1024, '\\')));
  // Not committed: only this transaction sees the rows.
  PgBinaryQuery q(tx.conn(), "SELECT id, body FROM " + table + " WHERE id = ANY($1::bigint[]) ORDER BY id",
                  {"{-7,3,4294967297}"});
  REQUIRE(q.rows() == 3);
  REQUIRE(q.columns() == 2);
  CHECK(q.int8(0, 0) == -7);
  CHECK(q.bytes(0, 1) == bytes);
  CHECK(q.int8(1, 0) == 3);
  CHECK(q.is_null(1, 1));
  CHECK(q.int8(2, 0) == 4294967297LL);
  CHECK(q.bytes(2, 1) == std::string(200 * 1024, '\\'));
  CHECK_THROWS_AS(q.int8(0, 1), pqxx::conversion_error);  // a bytea is not a bigint
  // libpqxx goes on in the same transaction as if nothing had happened.
  CHECK(tx.exec1("SELECT count(*) FROM " + table)[0].as<int>() == 3);
  tx.commit();
  CHECK(testenv::sql_value("SELECT count(*) FROM " + table) == "3");
}

TEST_CASE("an SQL error is a pqxx::sql_error with its SQLSTATE, and it aborts the transaction") {
  ScopedSchema schema;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  try {
    PgBinaryQuery q(tx.conn(), "SELECT id FROM \"" + schema.name() + "\".no_such_table WHERE id = $1", {"1"});
    FAIL("no error");
  } catch (const pqxx::sql_error& e) {
    CHECK(e.sqlstate() == "42P01");
    CHECK(std::string(e.what()).find("no_such_table") != std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line, for the log
  }
  CHECK_THROWS_AS(tx.exec("SELECT 1"), pqxx::sql_error);  // 25P02: aborted, as with libpqxx
}

TEST_CASE("a session that is gone is a pqxx::broken_connection") {
  pqxx::connection conn(testenv::pg_dsn());
  const auto pid = pqxx::nontransaction(conn).exec1("SELECT pg_backend_pid()")[0].as<int>();
  pqxx::work tx(conn);
  testenv::sql_value("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
  CHECK_THROWS_AS(PgBinaryQuery(tx.conn(), "SELECT $1::bigint", {"1"}), pqxx::broken_connection);
}

TEST_CASE("a prepared statement returns integers, doubles, booleans, tids and text by column name") {
  pqxx::connection conn(testenv::pg_dsn());
  PgBinaryQuery::prepare(conn, "binary_kinds",
                         "SELECT $1::int AS n, date_part('epoch', $2::timestamptz) AS t, $3::bool AS b, "
                         "$4::text AS s, NULL::int AS missing, '(4294967295,65535)'::tid AS far, "
                         "'(0,1)'::tid AS first");
  pqxx::work tx(conn);
  PgBinaryQuery q(tx.conn(), PgBinaryQuery::Prepared{"binary_kinds"},
                  {"-2147483648", "2026-12-01 12:00:00.25+00", "true", "caf\xC3\xA9"});
  REQUIRE(q.rows() == 1);
  CHECK(q.int4(0, q.column("n")) == -2147483648LL);
  CHECK(q.float8(0, q.column("t")) == doctest::Approx(1796126400.25).epsilon(1e-12));
  CHECK(q.boolean(0, q.column("b")));
  CHECK(q.bytes(0, q.column("s")) == "caf\xC3\xA9");
  CHECK(q.tid(0, q.column("far")) == "(4294967295,65535)");  // unsigned block and offset
  CHECK(q.tid(0, q.column("first")) == "(0,1)");
  CHECK_THROWS_AS(q.tid(0, q.column("n")), pqxx::conversion_error);
  CHECK_THROWS_AS(q.int4(0, q.column("missing")), pqxx::conversion_error);  // NULL is not a number
  CHECK_THROWS_AS(q.float8(0, q.column("n")), pqxx::conversion_error);      // 4 bytes are not a double
  CHECK_THROWS_AS(q.boolean(0, q.column("s")), pqxx::conversion_error);
  CHECK_THROWS_AS(q.column("nope"), pqxx::usage_error);
  // The statement lives on the session, past the transaction.
  tx.commit();
  pqxx::work again(conn);
  CHECK(PgBinaryQuery(again.conn(), PgBinaryQuery::Prepared{"binary_kinds"}, {"7", "1970-01-01 00:00:01+00", "false", ""})
            .int4(0, 0) == 7);
}

TEST_CASE("preparing a statement that does not compile is a pqxx::sql_error naming the problem") {
  ScopedSchema schema;
  pqxx::connection conn(testenv::pg_dsn());
  try {
    PgBinaryQuery::prepare(conn, "broken", "SELECT id FROM \"" + schema.name() + "\".no_such_table");
    FAIL("no error");
  } catch (const pqxx::sql_error& e) {
    CHECK(e.sqlstate() == "42P01");
    CHECK(std::string(e.what()).find("no_such_table") != std::string::npos);
  }
  CHECK_THROWS_AS(PgBinaryQuery(conn, PgBinaryQuery::Prepared{"broken"}, {}), pqxx::sql_error);
}
