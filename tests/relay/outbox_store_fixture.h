#pragma once
// Helpers for tests of OutboxStore against a real PostgreSQL: a connected store on a
// test schema, and pending rows written straight into its outbox.

#include <memory>
#include <string>

#include "pg/outbox_store.h"
#include "test_env.h"

namespace testenv {

inline std::unique_ptr<relay::OutboxStore> store_for(const std::string& schema, bool delete_on_publish = false) {
  relay::PostgresConfig config;
  config.dsn = pg_dsn();
  config.schema = schema;
  relay::StoreOptions options;
  options.delete_on_publish = delete_on_publish;
  auto store = std::make_unique<relay::OutboxStore>(config, options);
  store->connect();
  return store;
}

// `n` pending rows with ids 1..n in a fresh schema (payload: the row's number).
inline void write_rows(const std::string& schema, int n) {
  sql_exec("INSERT INTO \"" + schema +
           "\".outbox (message_id, exchange, routing_key, message_type, payload) "
           "SELECT gen_random_uuid(), 'x', 'rk', 'T', convert_to(g::text, 'UTF8') "
           "FROM generate_series(1, " +
           std::to_string(n) + ") g");
}

}  // namespace testenv
