// Migration files may mark index builds to run outside the migration's transaction
// (CREATE INDEX CONCURRENTLY); the marker is parsed strictly, so a typo fails the
// migration loudly instead of running a blocking build or none.
#include "outbox/migration_steps.h"

#include <doctest/doctest.h>

#include <regex>

#include "outbox/embedded_migrations.h"
#include "outbox/errors.h"
#include "test_text.h"

using namespace outbox;

namespace {

using testenv::contains;

// What the ValidationError parsing `sql` throws says, or "" when it parses.
std::string steps_error(const std::string& sql) {
  return testenv::error_of<ValidationError>([&] { MigrationSteps::parse(sql, "0099_test"); }, "");
}

}  // namespace

TEST_CASE("the indexes of migrations 0005 and 0006 are built outside the transaction") {
  std::vector<std::string> names;
  for (const auto& m : embedded_migrations()) {
    const auto steps = MigrationSteps::parse(m.sql, m.name);
    for (const auto& index : steps.indexes) {
      names.push_back(index.index);
      CHECK(index.table == "outbox");
      CHECK(contains(index.statement, "CREATE INDEX CONCURRENTLY IF NOT EXISTS " + index.index));
      CHECK_FALSE(contains(index.in_transaction_statement(), "CONCURRENTLY"));
      CHECK(contains(index.in_transaction_statement(), "CREATE INDEX IF NOT EXISTS " + index.index + " ON"));
      CHECK_FALSE(contains(steps.transactional, index.index + " ON"));
    }
    // Every other index build on the outbox runs on the table its migration creates
    // (0001): no other may block producers.
    static const std::regex outbox_index(R"(CREATE\s+(UNIQUE\s+)?INDEX[^;]*\{\{schema\}\}\.outbox\s*\()");
    if (m.version > 1) CHECK_MESSAGE(!std::regex_search(steps.transactional, outbox_index), m.name);
  }
  CHECK(names == std::vector<std::string>{"outbox_pending_key_idx", "outbox_parked_idx", "outbox_ready_idx",
                                          "outbox_scheduled_idx"});
}

TEST_CASE("the rest of a migration keeps its order and text") {
  const auto steps = MigrationSteps::parse(
      "SELECT 1;\n-- outbox-migrate: concurrently index=a_idx table=t\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx\n"
      "  ON {{schema}}.t (x);\nSELECT 2;\n",
      "0099_test");
  REQUIRE(steps.indexes.size() == 1);
  CHECK(steps.indexes[0].statement == "CREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx\n  ON {{schema}}.t (x);\n");
  CHECK(steps.transactional == "SELECT 1;\nSELECT 2;\n");
}

TEST_CASE("a malformed marker or a statement other than the index it names is refused, naming the line") {
  CHECK(steps_error("-- outbox-migrate: concurrently index=a_idx\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON "
                    "{{schema}}.t (x);") ==
        "migration 0099_test: line 1: expected '-- outbox-migrate: concurrently index=NAME table=TABLE'");
  CHECK(contains(
      steps_error("\n-- outbox-migrate: concurrently index=a_idx table=t\nCREATE INDEX a_idx ON {{schema}}.t (x);"),
      "migration 0099_test: line 3: the statement after the marker must be "
      "'CREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON {{schema}}.t ...;'"));
  CHECK(contains(steps_error("-- outbox-migrate: concurrently index=a_idx table=t\n"
                             "CREATE INDEX CONCURRENTLY IF NOT EXISTS b_idx ON {{schema}}.t (x);"),
                 "line 2"));
  CHECK(contains(steps_error("-- outbox-migrate: concurrently index=a_idx table=t\n"
                             "CREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON {{schema}}.t (x); DROP TABLE t;"),
                 "must be"));
}
