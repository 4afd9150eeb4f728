// Inbox retention cleanup against a real PostgreSQL.

#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "outbox/inbox_retention.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

namespace {

using namespace std::chrono_literals;

outbox::RetentionPolicy policy(std::chrono::seconds retention, int batch_size) {
  outbox::RetentionPolicy p;
  p.retention = retention;
  p.redelivery_horizon = retention;
  p.batch_size = batch_size;
  return p;
}

// `count` inbox rows processed `age` ago.
void insert_rows(const std::string& schema, int count, const std::string& age, const std::string& consumer) {
  testenv::sql_exec("INSERT INTO " + schema +
                    ".inbox (message_id, consumer, processed_at) SELECT gen_random_uuid(), '" + consumer +
                    "', now() - interval '" + age + "' FROM generate_series(1, " + std::to_string(count) + ")");
}

}  // namespace

TEST_CASE("purge deletes only rows older than the retention, in batches, and reports how many") {
  testenv::ScopedSchema schema("retention");
  insert_rows(schema.name(), 25, "10 days", "billing");
  insert_rows(schema.name(), 5, "10 days", "shipping");
  insert_rows(schema.name(), 7, "1 day", "billing");
  outbox::InboxRetention retention(schema.name(), policy(std::chrono::hours(24 * 7), 10));
  pqxx::connection conn(testenv::pg_dsn());
  auto result = retention.purge(conn);
  CHECK(result.removed == 30);
  CHECK(result.batches == 3);
  CHECK_FALSE(result.skipped);
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".inbox") == "7");
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() +
                           ".inbox WHERE processed_at < now() - interval '2 days'") == "0");
  CHECK(retention.purge(conn).removed == 0);  // nothing left to do
}

TEST_CASE("a purge while another cleanup of the schema runs returns at once as skipped") {
  testenv::ScopedSchema schema("retention");
  insert_rows(schema.name(), 3, "10 days", "billing");
  outbox::InboxRetention retention(schema.name(), policy(std::chrono::hours(24), 100));
  pqxx::connection holder(testenv::pg_dsn());
  outbox::pgx::exec_params(pqxx::nontransaction(holder), "SELECT pg_advisory_lock(hashtext($1))",
                           "outbox-inbox-purge:" + schema.name());
  pqxx::connection conn(testenv::pg_dsn());
  auto result = retention.purge(conn);
  CHECK(result.skipped);
  CHECK(result.removed == 0);
  CHECK(testenv::sql_value("SELECT count(*) FROM " + schema.name() + ".inbox") == "3");
  outbox::pgx::exec_params(pqxx::nontransaction(holder), "SELECT pg_advisory_unlock(hashtext($1))",
                           "outbox-inbox-purge:" + schema.name());
  CHECK(retention.purge(conn).removed == 3);
}
