#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// FieldEncryptor: replaces the sensitive fields of a payload by FieldEnvelopes.

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "outbox/event_schema.h"
#include "outbox/keyring.h"
#include "outbox/message_id.h"
#include "outbox/subject_key_store.h"

namespace outbox {

// Encrypts, in place, every value the schema marks x-gdpr-sensitive: under the
// keyring's active key, or under the data subject's key when the schema names an
// x-gdpr-subject. Searchable fields also get a blind index under the keyring's
// active blind-index key. Ids, totals and everything else stay readable.
// OutboxWriter calls it after assigning the message id, which the AAD binds.
// Thread safety: stateless after construction; share it between threads.
class FieldEncryptor {
 public:
  // `subject_keys` is needed only for schemas with x-gdpr-subject.
  // Throws ValidationError when `keyring` is null.
  explicit FieldEncryptor(std::shared_ptr<const Keyring> keyring,
                          std::shared_ptr<const SubjectKeyStore> subject_keys = nullptr);

  // Throws ValidationError when this encryptor cannot serve `schema`: searchable
  // fields without blind-index keys, or a subject without a subject key store.
  void check(const EventSchema& schema) const;

  // Replaces each sensitive value in `payload` by its envelope, bound to
  // `message_id`. REQUIRES: payload validated against `schema`; check(schema)
  // passed; `subject_key` given exactly when the schema names a subject.
  void encrypt(const EventSchema& schema, nlohmann::json& payload, const MessageId& message_id,
               const SubjectKeyStore::DataKey* subject_key = nullptr) const;

  const Keyring& keyring() const { return *keyring_; }
  // nullptr when none was configured.
  const SubjectKeyStore* subject_keys() const { return subject_keys_.get(); }

 private:
  std::shared_ptr<const Keyring> keyring_;
  std::shared_ptr<const SubjectKeyStore> subject_keys_;
};

}  // namespace outbox
