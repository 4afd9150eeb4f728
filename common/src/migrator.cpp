#include "outbox/migrator.h"

#include <algorithm>
#include <limits>
#include <pqxx/pqxx>
#include <set>

#include "outbox/embedded_migrations.h"
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

}  // namespace

Migrator::Migrator(std::string schema)
    : schema_(quoted_identifier(schema, "schema")), schema_name_(std::move(schema)) {}

Migrator::Result Migrator::migrate(pqxx::connection_base& conn) const {
  return migrate_to(conn, std::numeric_limits<int>::max());
}

Migrator::Result Migrator::migrate_to(pqxx::connection_base& conn, int version) const {
  pqxx::work tx(conn, "outbox_migrate");
  // Serialises concurrent migrators of this schema; released at commit or rollback.
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtext($1))", "outbox-migrate:" + schema_name_);
  tx.exec("CREATE SCHEMA IF NOT EXISTS " + schema_);
  tx.exec("CREATE TABLE IF NOT EXISTS " + schema_ +
          ".outbox_migrations (version integer PRIMARY KEY, name text NOT NULL, "
          "applied_at timestamptz NOT NULL DEFAULT now())");
  // Applies every version not recorded yet, not only those above the highest: a
  // schema recorded at a later version must still get an earlier one it lacks.
  std::set<int> applied;
  for (const auto& row : tx.exec("SELECT version FROM " + schema_ + ".outbox_migrations"))
    applied.insert(row[0].as<int>());
  Result result;
  result.version = applied.empty() ? 0 : *applied.rbegin();
  for (const auto& m : embedded_migrations()) {
    if (applied.count(m.version) || m.version > version) continue;
    tx.exec(render(m.sql, schema_));
    tx.exec_params("INSERT INTO " + schema_ + ".outbox_migrations (version, name) VALUES ($1, $2)",
                   m.version, std::string(m.name));
    result.applied.push_back(m.version);
    result.version = std::max(result.version, m.version);
  }
  tx.commit();
  return result;
}

}  // namespace outbox
