#include "outbox/migrator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "outbox/embedded_migrations.h"
#include "outbox/migration_steps.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox {
namespace {

std::string render(std::string_view sql, const std::string& quoted_schema) {
  std::string out(sql);
  const std::string placeholder = "{{schema}}";
  for (auto pos = out.find(placeholder); pos != std::string::npos;
       pos = out.find(placeholder, pos + quoted_schema.size()))
    out.replace(pos, placeholder.size(), quoted_schema);
  return out;
}

// Holds the schema's migration lock for the session, released on every way out.
// Taken by polling pg_try_advisory_lock rather than waiting in pg_advisory_lock: a
// session that waits inside a statement holds a snapshot, and CREATE INDEX
// CONCURRENTLY in the session that holds the lock waits for every older snapshot,
// so the two would wait for each other. The key is the one earlier migrators took
// per transaction (pg_advisory_xact_lock), so old and new exclude each other too.
class MigrationLock {
 public:
  MigrationLock(outbox::PgConnection& conn, std::string key) : conn_(conn), key_(std::move(key)) {
    for (auto pause = std::chrono::milliseconds(10);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
      pqxx::nontransaction tx(conn_);
      if (outbox::pgx::exec_params1(tx, "SELECT pg_try_advisory_lock(hashtext($1))", key_)[0].as<bool>()) return;
      std::this_thread::sleep_for(pause);
    }
  }
  ~MigrationLock() {
    try {
      pqxx::nontransaction tx(conn_);
      outbox::pgx::exec_params(tx, "SELECT pg_advisory_unlock(hashtext($1))", key_);
    } catch (const std::exception&) {
      // The connection is gone, and the session's lock with it.
    }
  }
  MigrationLock(const MigrationLock&) = delete;
  MigrationLock& operator=(const MigrationLock&) = delete;

 private:
  outbox::PgConnection& conn_;
  std::string key_;
};

// Whether the index exists and, if so, is valid. A CREATE INDEX CONCURRENTLY that
// failed or was cut off (a crash, a cancel, a statement_timeout) leaves an INVALID
// index behind: the planner never uses it but writers still maintain it.
enum class IndexState { kAbsent, kValid, kInvalid };

IndexState index_state(pqxx::transaction_base& tx, const std::string& schema, const std::string& index) {
  auto r =
      outbox::pgx::exec_params(tx,
                               "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                               "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                               schema, index);
  if (r.empty()) return IndexState::kAbsent;
  return r[0][0].as<bool>() ? IndexState::kValid : IndexState::kInvalid;
}

}  // namespace

Migrator::Migrator(std::string schema)
    : schema_(quoted_identifier(schema, "schema")), schema_name_(std::move(schema)) {}

Migrator::Result Migrator::migrate(outbox::PgConnection& conn) const {
  return migrate_to(conn, std::numeric_limits<int>::max());
}

Migrator::Result Migrator::migrate_to(outbox::PgConnection& conn, int version) const {
  MigrationLock lock(conn, "outbox-migrate:" + schema_name_);
  std::set<int> applied;
  {
    pqxx::work tx(conn, "outbox_migrate");
    tx.exec("CREATE SCHEMA IF NOT EXISTS " + schema_);
    tx.exec("CREATE TABLE IF NOT EXISTS " + schema_ +
            ".outbox_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())");
    for (const auto& row : tx.exec("SELECT version FROM " + schema_ + ".outbox_migrations"))
      applied.insert(row[0].as<int>());
    tx.commit();
  }
  // Applies every version not recorded yet, not only those above the highest: a
  // schema recorded at a later version must still get an earlier one it lacks.
  Result result;
  result.version = applied.empty() ? 0 : *applied.rbegin();
  for (const auto& m : embedded_migrations()) {
    if (applied.count(m.version) || m.version > version) continue;
    apply(conn, m.version, m.name, m.sql);
    result.applied.push_back(m.version);
    result.version = std::max(result.version, m.version);
  }
  return result;
}

void Migrator::apply(outbox::PgConnection& conn, int version, std::string_view name, std::string_view sql) const {
  const auto steps = MigrationSteps::parse(sql, std::to_string(version) + "_" + std::string(name));
  std::vector<const ConcurrentIndex*> in_transaction;
  for (const auto& index : steps.indexes) {
    if (!builds_concurrently(conn, index)) {
      in_transaction.push_back(&index);
      continue;
    }
    // Outside any transaction: writers go on while it builds. Idempotent, so a
    // migration cut off after its index and before its record runs again cleanly.
    pqxx::nontransaction tx(conn);
    const auto state = index_state(tx, schema_name_, index.index);
    if (state == IndexState::kValid) continue;
    if (state == IndexState::kInvalid)
      tx.exec("DROP INDEX CONCURRENTLY IF EXISTS " + schema_ + "." + quoted_identifier(index.index, "index"));
    tx.exec(render(index.statement, schema_));
  }
  pqxx::work tx(conn, "outbox_migrate");
  // A long transaction holding the outbox must fail the migration (run it again
  // later), not queue every producer's INSERT behind the migration's lock request.
  // A migration may set its own.
  tx.exec("SET LOCAL lock_timeout = '10s'");
  for (const auto* index : in_transaction) {
    if (index_state(tx, schema_name_, index->index) == IndexState::kInvalid)
      tx.exec("DROP INDEX " + schema_ + "." + quoted_identifier(index->index, "index"));
    tx.exec(render(index->in_transaction_statement(), schema_));
  }
  tx.exec(render(steps.transactional, schema_));
  outbox::pgx::exec_params(tx, "INSERT INTO " + schema_ + ".outbox_migrations (version, name) VALUES ($1, $2)", version,
                           std::string(name));
  tx.commit();
}

bool Migrator::builds_concurrently(outbox::PgConnection& conn, const ConcurrentIndex& index) const {
  pqxx::nontransaction tx(conn);
  const auto bytes = outbox::pgx::exec_params1(tx, "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0)",
                                               schema_ + "." + quoted_identifier(index.table, "table"))[0]
                         .as<long long>();
  return bytes >= concurrent_index_min_bytes_;
}

}  // namespace outbox
