#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// FieldDecryptor: restores the sensitive fields of a payload from their envelopes.

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "outbox/keyring.h"
#include "outbox/message_id.h"
#include "outbox/schema_registry.h"
#include "outbox/subject_key_store.h"

namespace outbox {

// The inverse of FieldEncryptor, for a consumer holding the keyring. With a schema
// for the message's type, every field the schema marks sensitive must be an
// envelope (a plain value there is refused: it was never encrypted, or was
// replaced), and the restored payload must pass the schema. Without one, every
// envelope found is opened. Any failure throws DecryptionError (a PermanentError)
// naming the JSON path; an erased subject throws SubjectErasedError. Nothing
// partially decrypted is ever returned.
// Thread safety: const methods are safe from many threads if `fetch_subject_key` is.
class FieldDecryptor {
 public:
  // Loads a subject's data key by envelope "skid", e.g. with SubjectKeyStore::fetch
  // in a read-only transaction of the consumer's own. Throws DecryptionError /
  // SubjectErasedError.
  using SubjectKeyFetcher = std::function<SubjectKeyStore::DataKey(const std::string& key_id)>;

  // Throws ValidationError when `keyring` is null.
  explicit FieldDecryptor(std::shared_ptr<const Keyring> keyring,
                          std::shared_ptr<const SchemaRegistry> schemas = nullptr,
                          SubjectKeyFetcher fetch_subject_key = nullptr);

  // Decrypts `payload` (the message body) of a message of `type` with `message_id`
  // and returns the plaintext JSON text.
  std::string decrypt(const std::string& type, std::string_view payload, const MessageId& message_id) const;
  // The same on a parsed payload, in place (left unchanged when it throws).
  void decrypt(const std::string& type, nlohmann::json& payload, const MessageId& message_id) const;

 private:
  // Subject keys already fetched while decrypting one payload, by key id.
  using SubjectKeys = std::map<std::string, SubjectKeyStore::DataKey>;
  void open_at(nlohmann::json& value, const std::string& path, const MessageId& id, SubjectKeys& keys) const;
  void open_all(nlohmann::json& value, const std::string& path, const MessageId& id, SubjectKeys& keys) const;

  std::shared_ptr<const Keyring> keyring_;
  std::shared_ptr<const SchemaRegistry> schemas_;
  SubjectKeyFetcher fetch_subject_key_;
};

}  // namespace outbox
