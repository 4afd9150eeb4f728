#include "outbox/inbox_retention.h"

#include <pqxx/pqxx>

#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox {

void validate_retention_policy(const RetentionPolicy& p) {
  if (p.redelivery_horizon.count() <= 0)
    throw ValidationError("redelivery_horizon", format_duration(p.redelivery_horizon) + " must be positive");
  if (p.retention < p.redelivery_horizon)
    throw ValidationError("retention", format_duration(p.retention) + " is shorter than the redelivery horizon " +
                                           format_duration(p.redelivery_horizon) +
                                           " (the longest a message can come back): a message redelivered after its "
                                           "inbox row was deleted would be processed twice");
  if (p.batch_size < 1 || p.batch_size > 100000)
    throw ValidationError("batch_size", std::to_string(p.batch_size) + " is outside 1-100000");
}

InboxRetention::InboxRetention(std::string schema, RetentionPolicy policy)
    : schema_name_(std::move(schema)), policy_(policy) {
  std::string table = quoted_identifier(schema_name_, "schema") + ".inbox";
  validate_retention_policy(policy_);
  // SKIP LOCKED: never wait for (or deadlock with) a consumer holding a row.
  delete_sql_ = "DELETE FROM " + table + " WHERE (message_id, consumer) IN (SELECT message_id, consumer FROM " + table +
                " WHERE processed_at < now() - make_interval(secs => $1) ORDER BY processed_at LIMIT $2 "
                "FOR UPDATE SKIP LOCKED)";
}

InboxRetention::PurgeResult InboxRetention::purge(outbox::PgConnection& conn) const {
  PurgeResult result;
  const std::string lock_key = "outbox-inbox-purge:" + schema_name_;
  {
    pqxx::nontransaction tx(conn);
    if (!outbox::pgx::exec_params1(tx, "SELECT pg_try_advisory_lock(hashtext($1))", lock_key)[0].as<bool>()) {
      result.skipped = true;
      return result;
    }
  }
  auto unlock = [&] {
    pqxx::nontransaction tx(conn);
    outbox::pgx::exec_params(tx, "SELECT pg_advisory_unlock(hashtext($1))", lock_key);
  };
  try {
    const double seconds = static_cast<double>(policy_.retention.count());
    for (;;) {
      pqxx::work tx(conn, "inbox_purge");
      auto removed = outbox::pgx::exec_params(tx, delete_sql_, seconds, policy_.batch_size).affected_rows();
      tx.commit();
      if (removed == 0) break;
      result.removed += static_cast<std::int64_t>(removed);
      ++result.batches;
      if (static_cast<std::int64_t>(removed) < static_cast<std::int64_t>(policy_.batch_size)) break;
    }
  } catch (...) {
    try {
      unlock();
    } catch (...) {  // the connection is gone: the server released the lock with it
    }
    throw;
  }
  unlock();
  return result;
}

}  // namespace outbox
