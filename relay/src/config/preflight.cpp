#include "config/preflight.h"

#include <pqxx/pqxx>

#include "config/doc_paths.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace relay {

namespace {

// Every column the relay and its admin commands set (claim, mark published/failed,
// park, replay, dead requeue): the UPDATE grant of schema/roles.sql, no more.
constexpr const char* kRelayUpdatedColumns[] = {"attempts",          "next_attempt_at", "last_error",
                                                "refused_by_broker", "published_at",    "parked_at"};

}  // namespace

std::vector<std::string> missing_privileges(outbox::PgConnection& conn, const std::string& schema, bool retention,
                                            bool delete_on_publish) {
  const auto table = outbox::quoted_identifier(schema, "postgres.schema") + ".outbox";
  pqxx::read_transaction tx(conn);
  if (outbox::pgx::exec_params1(tx, "SELECT to_regnamespace($1) IS NULL",
                                outbox::quoted_identifier(schema, "postgres.schema"))[0]
          .as<bool>())
    throw PreflightError("schema '" + schema + "' does not exist: run outbox-relay migrate first");
  if (!outbox::pgx::exec_params1(tx, "SELECT has_schema_privilege(current_user, $1, 'USAGE')", schema)[0].as<bool>())
    return {"USAGE on schema \"" + schema + "\" (to reach the outbox table)"};
  if (outbox::pgx::exec_params1(tx, "SELECT to_regclass($1) IS NULL", table)[0].as<bool>())
    throw PreflightError("table " + table + " does not exist: run outbox-relay migrate first");
  // The newest column the claim reads: a schema migrated by an older release fails
  // here, saying what to do, rather than at every claim.
  if (!outbox::pgx::exec_params1(tx,
                                 "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass "
                                 "AND attname = 'deliver_at' AND NOT attisdropped)",
                                 table)[0]
           .as<bool>())
    throw PreflightError("table " + table +
                         " has no column deliver_at (migration 0018), which this outbox-relay claims by: run "
                         "outbox-relay migrate first");
  struct Need {
    const char* privilege;
    const char* why;
  };
  std::vector<Need> needs = {{"SELECT", "reads pending rows"}};
  if (retention) needs.push_back({"DELETE", "retention deletes old published rows"});
  if (delete_on_publish && !retention) needs.push_back({"DELETE", "relay.on_publish: delete removes rows at ack"});
  std::vector<std::string> missing;
  for (const auto& n : needs)
    if (!outbox::pgx::exec_params1(tx, "SELECT has_table_privilege(current_user, $1, $2)", table, n.privilege)[0]
             .as<bool>())
      missing.push_back(std::string(n.privilege) + " on " + table + " (" + n.why + ")");
  // roles.sql grants UPDATE of these columns only (has_table_privilege would say no),
  // so each is checked: a column missing would fail the first mark, not the start.
  std::string columns;
  for (const char* column : kRelayUpdatedColumns)
    if (!outbox::pgx::exec_params1(tx, "SELECT has_column_privilege(current_user, $1, $2, 'UPDATE')", table, column)[0]
             .as<bool>())
      columns += (columns.empty() ? "" : ", ") + std::string(column);
  if (!columns.empty())
    missing.push_back("UPDATE on " + table + " of column(s) " + columns +
                      " (claims rows FOR UPDATE and marks them published, failed or parked)");
  return missing;
}

void preflight(outbox::PgConnection& conn, const RelayConfig& config) {
  auto missing = missing_privileges(conn, config.postgres.schema, config.retention.enabled,
                                    config.relay.on_publish == OnPublish::kDelete);
  if (!missing.empty()) {
    std::string role;
    {
      pqxx::read_transaction tx(conn);
      role = outbox::pgx::exec1(tx, "SELECT current_user")[0].c_str();
    }
    std::string text = "PostgreSQL role '" + role + "' lacks ";
    for (std::size_t i = 0; i < missing.size(); ++i) text += (i ? "; and " : "") + missing[i];
    throw PreflightError(text + ". Grant the relay role with roles.sql (" + kRolesSqlWhere + "; OPERATIONS.md " +
                         kDocsWhere + ")");
  }
}

void require_tls_session(outbox::PgConnection& conn, const PostgresConfig& postgres) {
  if (!postgres.require_tls) return;
  pqxx::read_transaction tx(conn);
  auto r = tx.exec("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
  if (r.empty() || !r[0][0].as<bool>()) throw PreflightError(kNotEncryptedSession);
}

}  // namespace relay
