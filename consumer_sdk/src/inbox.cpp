#include "outbox/inbox.h"

#include <pqxx/pqxx>

#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox {

Inbox::Inbox(InboxOptions options) : options_(std::move(options)) {
  std::string schema = quoted_identifier(options_.schema, "schema");
  validate_consumer_name(options_.consumer);
  // ON CONFLICT names the inbox's own key: the database itself tells this conflict
  // from any other unique violation (which is raised). A concurrent uncommitted row
  // with the same key makes the insert wait for its transaction's outcome.
  insert_sql_ = "INSERT INTO " + schema +
                ".inbox (message_id, consumer, message_type) VALUES ($1::uuid, $2, NULLIF($3, '')) "
                "ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING";
  contains_sql_ = "SELECT EXISTS (SELECT FROM " + schema + ".inbox WHERE message_id = $1::uuid AND consumer = $2)";
}

bool Inbox::contains(pqxx::transaction_base& tx, const MessageId& message_id) const {
  return outbox::pgx::exec_params1(tx, contains_sql_, message_id.to_string(), options_.consumer.value())[0].as<bool>();
}

InboxOutcome Inbox::record(pqxx::transaction_base& tx, const MessageId& message_id,
                           const std::string& message_type) const {
  // A sentinel id recorded once would make every later message carrying it a duplicate.
  if (message_id.is_sentinel())
    throw ValidationError("message_id", "is the UUID " + message_id.to_string() +
                                            ", which names no message: refusing to deduplicate on it");
  auto r = outbox::pgx::exec_params(tx, insert_sql_, message_id.to_string(), options_.consumer.value(), message_type);
  return r.affected_rows() == 1 ? InboxOutcome::kNew : InboxOutcome::kDuplicate;
}

}  // namespace outbox
