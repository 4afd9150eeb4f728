#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Inbox: records (message id, consumer) in the caller's transaction, before the effect.

#include <string>

#include "outbox/consumer_name.h"
#include "outbox/message_id.h"

namespace pqxx {
class transaction_base;
}

namespace outbox {

struct InboxOptions {
  std::string schema = "outbox";  // schema holding the inbox table (a plain identifier)
  ConsumerName consumer;          // required; see validate_consumer_name
};

enum class InboxOutcome {
  kNew,        // recorded now: perform the effect in the same transaction, then commit
  kDuplicate,  // this consumer already committed this message: perform nothing
};

// Gives a redelivered message one effect. Call record() first in the transaction
// that performs the effect; the inbox row, the effect (and any outgoing events)
// commit together or not at all.
//
// Concurrency: a second delivery of the same message waits inside record() for the
// first delivery's transaction. If that commits, the second gets kDuplicate; if it
// rolls back, the second gets kNew and does the work. So the transaction stays open,
// holding the inbox row, for as long as the effect runs.
//
// Only a conflict on the inbox's own key (constraint inbox_pkey) is a duplicate; any
// other unique violation raised by the insert (a trigger, an extra index) propagates
// as pqxx::unique_violation.
//
// Thread safety: stateless after construction; one Inbox may be shared by threads,
// each using its own transaction.
// REQUIRES: the schema was migrated by Migrator; READ COMMITTED transactions (under
// REPEATABLE READ a concurrent committed duplicate raises a serialization failure).
class Inbox {
 public:
  // Throws ValidationError when the schema or the consumer name is bad.
  explicit Inbox(InboxOptions options);

  // `message_type` is stored for operators only (may be empty). Throws
  // ValidationError, recording nothing, for the nil or max UUID (MessageId::parse_distinct).
  InboxOutcome record(pqxx::transaction_base& tx, const MessageId& message_id,
                      const std::string& message_type = "") const;

  // Whether this consumer committed `message_id` and its row is still kept.
  bool contains(pqxx::transaction_base& tx, const MessageId& message_id) const;

  const ConsumerName& consumer() const { return options_.consumer; }
  const std::string& schema() const { return options_.schema; }

 private:
  InboxOptions options_;
  std::string insert_sql_;
  std::string contains_sql_;
};

}  // namespace outbox
