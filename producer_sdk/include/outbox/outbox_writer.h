#pragma once
// OutboxWriter: writes outbox rows inside the caller's own transaction.

#include <string>
#include <vector>

#include "outbox/message.h"
#include "outbox/message_id.h"

namespace pqxx { class transaction_base; }

namespace outbox {

struct WriterOptions {
  std::string schema = "outbox";  // schema holding the outbox table (a plain identifier)
  MessageLimits limits;           // payload size cap and friends
};

// Enqueues messages in the caller's transaction, so the business rows and their
// events commit or roll back together. Stateless after construction: one writer may
// be shared by threads, each using its own transaction.
//
// REQUIRES: the transaction's connection is to a database migrated by Migrator for
// the same schema.
class OutboxWriter {
 public:
  // Throws ValidationError when options.schema is not a plain identifier.
  explicit OutboxWriter(WriterOptions options = {});

  // Validates, assigns the message id (when absent) and inserts one row.
  // Throws ValidationError before anything is written when the message is bad.
  MessageId enqueue(pqxx::transaction_base& tx, const Message& message) const;

  // Validates every message first (nothing is written if any is bad), then inserts
  // all of them with one statement. Ids are returned in input order.
  std::vector<MessageId> enqueue_batch(pqxx::transaction_base& tx,
                                       const std::vector<Message>& messages) const;

 private:
  WriterOptions options_;
  std::string insert_sql_;
};

}  // namespace outbox
