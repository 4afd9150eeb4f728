#include "outbox/field_decryptor.h"

#include <nlohmann/json.hpp>

#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/field_envelope.h"
#include "outbox/payload_json.h"

namespace outbox {

FieldDecryptor::FieldDecryptor(std::shared_ptr<const Keyring> keyring, std::shared_ptr<const SchemaRegistry> schemas,
                               SubjectKeyFetcher fetch_subject_key)
    : keyring_(std::move(keyring)), schemas_(std::move(schemas)), fetch_subject_key_(std::move(fetch_subject_key)) {
  if (!keyring_) throw ValidationError("keyring", "a field decryptor needs a keyring");
}

std::string FieldDecryptor::decrypt(const std::string& type, std::string_view payload,
                                    const MessageId& message_id) const {
  PayloadJson parsed(payload, /*exact_numbers=*/true);  // serialised again below
  if (!parsed.ok()) throw DecryptionError(parsed.path(), "the payload: " + parsed.problem());
  decrypt(type, parsed.value(), message_id);
  return parsed.value().dump();
}

void FieldDecryptor::decrypt(const std::string& type, nlohmann::json& payload, const MessageId& message_id) const {
  nlohmann::json work = payload;  // the caller's copy stays untouched if anything fails
  SubjectKeys keys;
  const EventSchema* schema = schemas_ ? schemas_->find(type) : nullptr;
  if (schema) {
    schema->for_each_sensitive(work, [&](const EventSchema::SensitiveField& field, nlohmann::json& value) {
      open_at(value, field.path, message_id, keys);
    });
    try {
      schema->validate(work);
    } catch (const SchemaValidationError& e) {
      // An envelope where the schema has none lands here too: never pass it on.
      throw DecryptionError(e.path(),
                            "the decrypted payload breaks the " + quoted_value(type) + " schema: " + e.detail());
    }
  } else {
    open_all(work, "$", message_id, keys);
  }
  payload = std::move(work);
}

void FieldDecryptor::open_all(nlohmann::json& value, const std::string& path, const MessageId& id,
                              SubjectKeys& keys) const {
  if (FieldEnvelope::is_envelope(value)) {
    open_at(value, path, id, keys);
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) open_all(it.value(), path + "." + it.key(), id, keys);
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) open_all(value[i], path + "[" + std::to_string(i) + "]", id, keys);
  }
}

void FieldDecryptor::open_at(nlohmann::json& value, const std::string& path, const MessageId& id,
                             SubjectKeys& keys) const {
  const auto env = FieldEnvelope::from_json(value, path);
  const SecretKey* key = nullptr;
  if (env.key_kind() == FieldEnvelope::KeyKind::kMaster) {
    key = keyring_->find(env.key_id());
    if (!key) throw DecryptionError(path, "unknown key id " + quoted_value(env.key_id()) + " (not in this keyring)");
  } else {
    auto it = keys.find(env.key_id());
    if (it == keys.end()) {
      if (!fetch_subject_key_)
        throw DecryptionError(path, "encrypted under subject key " + quoted_value(env.key_id()) +
                                        " but this decryptor has no subject key source");
      try {
        it = keys.emplace(env.key_id(), fetch_subject_key_(env.key_id())).first;
      } catch (const SubjectErasedError& e) {
        throw SubjectErasedError(path, e.what());
      } catch (const DecryptionError& e) {
        throw DecryptionError(path, e.what());
      }
    }
    key = &it->second.key;
  }
  value = env.open(*key, id, path);
}

}  // namespace outbox
