#include "outbox/field_encryptor.h"

#include <nlohmann/json.hpp>

#include "outbox/error_text.h"
#include "outbox/errors.h"
#include "outbox/field_envelope.h"

namespace outbox {

FieldEncryptor::FieldEncryptor(std::shared_ptr<const Keyring> keyring,
                               std::shared_ptr<const SubjectKeyStore> subject_keys)
    : keyring_(std::move(keyring)), subject_keys_(std::move(subject_keys)) {
  if (!keyring_) throw ValidationError("keyring", "a field encryptor needs a keyring");
}

void FieldEncryptor::check(const EventSchema& schema) const {
  if (schema.has_searchable_fields() && !keyring_->has_index_keys())
    throw ValidationError("keyring", "event type " + quoted_value(schema.type()) +
                                         " has searchable fields but the keyring has no blind_index keys");
  if (!schema.subject_field().empty() && !subject_keys_)
    throw ValidationError("encryptor", "event type " + quoted_value(schema.type()) + " names subject field " +
                                           quoted_value(schema.subject_field()) +
                                           " but the encryptor has no subject key store");
}

void FieldEncryptor::encrypt(const EventSchema& schema, nlohmann::json& payload, const MessageId& message_id,
                             const SubjectKeyStore::DataKey* subject_key) const {
  const bool by_subject = !schema.subject_field().empty();
  if (by_subject != (subject_key != nullptr))
    throw std::logic_error("FieldEncryptor::encrypt: a subject key is needed exactly when the schema names a subject");
  const auto kind = by_subject ? FieldEnvelope::KeyKind::kSubject : FieldEnvelope::KeyKind::kMaster;
  const SecretKey& key = by_subject ? subject_key->key : keyring_->active_key();
  const std::string& key_id = by_subject ? subject_key->key_id : keyring_->active_id();
  schema.for_each_sensitive(payload, [&](const EventSchema::SensitiveField& field, nlohmann::json& value) {
    std::optional<FieldEnvelope::BlindIndex> index;
    if (!field.index_name.empty())
      index = FieldEnvelope::BlindIndex{
          keyring_->index_active_id(),
          FieldEnvelope::blind_index(keyring_->index_active_key(), field.index_name, value)};
    value = FieldEnvelope::seal(key, kind, key_id, message_id, field.path, value, std::move(index)).to_json();
  });
}

}  // namespace outbox
