// Retention inside the relay: old published rows go, in batches, only while the
// relay holds the schema's retention lock; pending, parked and recent rows stay.
#include <doctest/doctest.h>

#include <csignal>
#include <pqxx/pqxx>
#include <thread>

#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using testenv::RelayProcess;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

using testenv::contains;

// 100 rows: ids 1-80 published 10 days ago, 81-90 published now, 91-95 pending
// since 10 days, 96-100 parked since 10 days. Exchange 'ex' does not exist, but
// nothing here is due for publishing.
void fill(const std::string& t) {
  sql_exec("INSERT INTO " + t +
           " (message_id, exchange, routing_key, message_type, payload, created_at, "
           "next_attempt_at) SELECT gen_random_uuid(), 'ex', 'rk', 'T', 'x', now() - interval '10 days', "
           "now() + interval '1 day' FROM generate_series(1, 100)");
  sql_exec("UPDATE " + t + " SET published_at = created_at + interval '1 second' WHERE id <= 80");
  sql_exec("UPDATE " + t + " SET published_at = now() WHERE id BETWEEN 81 AND 90");
  sql_exec("UPDATE " + t + " SET parked_at = now() WHERE id > 95");
}

std::string retention_yaml(const ScopedSchema& schema) {
  return testenv::relay_config_yaml(schema.name()) +
         "retention:\n  enabled: true\n  keep: 7d\n  batch_size: 7\n  pause_ms: 0\n  interval_s: 1\n";
}

bool wait_for_count(const std::string& t, const std::string& count, std::chrono::seconds limit) {
  return testenv::eventually(
      limit, [&] { return sql_value("SELECT count(*) FROM " + t) == count; }, std::chrono::milliseconds(100));
}

}  // namespace

TEST_CASE("relay retention deletes old published rows in batches and keeps pending, parked and recent ones") {
  ScopedSchema schema;
  const std::string t = "\"" + schema.name() + "\".outbox";
  fill(t);
  RelayProcess relay(retention_yaml(schema));
  CHECK(wait_for_count(t, "20", std::chrono::seconds(20)));
  CHECK(sql_value("SELECT min(id) FROM " + t) == "81");
  CHECK(sql_value("SELECT count(*) FROM " + t + " WHERE published_at IS NULL AND parked_at IS NULL") == "5");
  CHECK(sql_value("SELECT count(*) FROM " + t + " WHERE parked_at IS NOT NULL") == "5");
  relay.signal(SIGTERM);
  CHECK(relay.wait() == 0);
  CHECK(contains(relay.log(), "retention: deleted 80 rows published more than 7d ago"));
}

TEST_CASE("relay retention waits while another session holds the schema's retention lock") {
  ScopedSchema schema;
  const std::string t = "\"" + schema.name() + "\".outbox";
  fill(t);
  pqxx::connection holder(testenv::pg_dsn());
  const std::string key = "hashtextextended('outbox-retention:" + schema.name() + "', 0)";
  pqxx::nontransaction(holder).exec("SELECT pg_advisory_lock(" + key + ")");
  RelayProcess first(retention_yaml(schema));
  RelayProcess second(retention_yaml(schema));
  // Two relays, several retention intervals: neither deletes anything.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  CHECK(sql_value("SELECT count(*) FROM " + t) == "100");
  CHECK(contains(first.log(), "retention: another relay holds the retention lock; skipped"));
  CHECK(contains(second.log(), "retention: another relay holds the retention lock; skipped"));

  pqxx::nontransaction(holder).exec("SELECT pg_advisory_unlock(" + key + ")");
  CHECK(wait_for_count(t, "20", std::chrono::seconds(20)));
  first.signal(SIGTERM);
  second.signal(SIGTERM);
  CHECK(first.wait() == 0);
  CHECK(second.wait() == 0);
  // Both relays reported their deletions; together exactly the 80 old rows.
  auto deleted = [](const std::string& log) {
    auto at = log.find("retention: deleted ");
    return at == std::string::npos ? 0 : std::stoi(log.substr(at + 19));
  };
  CHECK(deleted(first.log()) + deleted(second.log()) == 80);
}
