#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// OutboxWriter: writes outbox rows inside the caller's own transaction.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outbox/message.h"
#include "outbox/message_id.h"

namespace pqxx {
class transaction_base;
}

namespace outbox {

class FieldEncryptor;
class SchemaRegistry;

struct WriterOptions {
  std::string schema = "outbox";  // schema holding the outbox table (a plain identifier)
  MessageLimits limits;           // payload size cap and friends (checked after encryption too)
  // Event schemas (schema/events/*.yaml). When set, the payload of a message whose
  // type has a schema must be JSON that passes it; SchemaValidationError names the
  // JSON path otherwise, and nothing is written.
  std::shared_ptr<const SchemaRegistry> event_schemas = nullptr;
  // With event_schemas: refuse a message whose type has no schema. Without
  // event_schemas the writer refuses to be constructed.
  bool require_event_schema = false;
  // Encrypts the fields a schema marks x-gdpr-sensitive, bound to the message id.
  // Without it, a type with sensitive fields is refused: never written in clear.
  // Needs event_schemas (they say which fields): without them the writer refuses
  // to be constructed.
  std::shared_ptr<const FieldEncryptor> encryptor = nullptr;
};

// Enqueues messages in the caller's transaction, so the business rows and their
// events commit or roll back together. Stateless after construction: one writer may
// be shared by threads, each using its own transaction.
//
// REQUIRES: the transaction's connection is to a database migrated by Migrator for
// the same schema.
class OutboxWriter {
 public:
  // Throws ValidationError when options.schema is not a plain identifier, or when
  // require_event_schema or an encryptor is set without event_schemas.
  explicit OutboxWriter(WriterOptions options = {});

  // Validates, assigns the message id (when absent), validates the payload against
  // its event schema and encrypts its sensitive fields (when configured), then
  // inserts one row. Throws ValidationError (SchemaValidationError for the
  // payload) before any outbox row is written when the message is bad. A schema
  // naming an x-gdpr-subject may create that subject's key row in `tx` first.
  // A pqxx::nontransaction is refused (ValidationError "transaction"): the row must
  // commit or vanish with the caller's business rows.
  MessageId enqueue(pqxx::transaction_base& tx, const Message& message) const;

  // Validates every message first (nothing is written if any is bad; two messages
  // given one message_id are bad too), then inserts all of them with one statement.
  // Ids are returned in input order.
  std::vector<MessageId> enqueue_batch(pqxx::transaction_base& tx, const std::vector<Message>& messages) const;

 private:
  // Payloads after schema validation and encryption, in input order; empty
  // optional = the message's own payload unchanged.
  std::vector<std::optional<std::string>> prepare_payloads(pqxx::transaction_base& tx,
                                                           const std::vector<Message>& messages,
                                                           const std::vector<MessageId>& ids) const;

  WriterOptions options_;
  std::string insert_sql_;
  std::string insert_scheduled_sql_;  // with deliver_at (migration 0018)
};

}  // namespace outbox
