#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// PayloadDecryptor: restores a delivered payload's encrypted fields for a consumer
// that holds the keyring (see docs/ENCRYPTION.md).

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "outbox/delivery.h"
#include "outbox/environment_error.h"
#include "outbox/field_decryptor.h"
#include "outbox/keyring.h"
#include "outbox/message_id.h"
#include "outbox/schema_registry.h"

namespace outbox {

struct PayloadDecryptorOptions {
  // Required: every key the producers encrypted with (old ones too, after rotation).
  std::shared_ptr<const Keyring> keyring = nullptr;
  // Recommended: with a schema for the message type, a sensitive field that is not
  // an envelope is refused and the restored payload must pass the schema.
  std::shared_ptr<const SchemaRegistry> event_schemas = nullptr;
  // PostgreSQL holding the producers' outbox_subject_keys table (crypto-shredding).
  // Empty: a field under a subject key is a DecryptionError. May hold a password:
  // it never appears in an error or a log.
  std::string subject_keys_dsn;
  // Schema of that table (the producers' outbox schema).
  std::string subject_keys_schema = "outbox";
  // The longest a subject-key lookup may wait for that database: libpq's
  // connect_timeout (whole seconds, at least 2) and the session's statement_timeout,
  // unless subject_keys_dsn sets its own. Past it the lookup fails with
  // EnvironmentError (the message is requeued, no try counted) and frees the
  // connection the workers share, so a key database that hangs cannot hold them.
  std::chrono::milliseconds subject_keys_timeout{5000};
};

// Wraps FieldDecryptor for a consumer handler: body in, plaintext body out.
// Failures that retrying cannot fix (tampered nonce, tag or ciphertext, unknown
// key id, an envelope swapped between fields or messages, an erased subject)
// throw DecryptionError / SubjectErasedError, both outbox::PermanentError, so the
// consumer runner dead-letters the message at once and never passes garbage on.
// An unreachable or failing key database throws EnvironmentError instead: the runner
// requeues the message without counting a try, however long the outage lasts.
// Subject keys are fetched per message, never cached, so an erasure takes effect
// at once.
// Thread safety: decrypt() may be called from many threads; subject-key lookups
// share one lazily opened connection under a mutex. Owns that connection: not copyable.
class PayloadDecryptor {
 public:
  // Throws ValidationError when the keyring is missing or the schema name is bad,
  // std::invalid_argument when libpq cannot parse subject_keys_dsn (naming options
  // only, never a value).
  explicit PayloadDecryptor(PayloadDecryptorOptions options);
  ~PayloadDecryptor();
  PayloadDecryptor(const PayloadDecryptor&) = delete;
  PayloadDecryptor& operator=(const PayloadDecryptor&) = delete;

  // The plaintext payload of a message of `type` with `message_id` (both from the
  // AMQP properties). A payload without envelopes comes back re-serialised, unchanged.
  std::string decrypt(const std::string& type, std::string_view body, const MessageId& message_id) const;
  // The same for a delivery handed to a ConsumerRunner handler.
  std::string decrypt(const Delivery& delivery) const;

 private:
  SubjectKeyStore::DataKey fetch_subject_key(const std::string& key_id) const;

  PayloadDecryptorOptions options_;
  std::string key_dsn_;  // subject_keys_dsn with the lookup's limits; never logged
  std::unique_ptr<SubjectKeyStore> store_;
  std::unique_ptr<FieldDecryptor> decryptor_;
  struct KeyConnection;  // the PostgreSQL connection for subject keys
  mutable std::mutex mu_;
  mutable std::unique_ptr<KeyConnection> conn_;  // guarded by mu_; opened on first use
};

}  // namespace outbox
