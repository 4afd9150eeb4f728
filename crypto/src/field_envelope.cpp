#include "outbox/field_envelope.h"

#include <openssl/crypto.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "crypto_primitives.h"
#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/keyring.h"
#include "outbox/payload_json.h"

namespace outbox {
namespace {

std::string_view raw(const std::uint8_t* p, std::size_t n) { return {reinterpret_cast<const char*>(p), n}; }

// Decodes member `name` of an envelope, requiring exactly `size` bytes (0: any).
std::string member_bytes(const nlohmann::json& env, const char* name, std::size_t size, const std::string& path) {
  auto it = env.find(name);
  if (it == env.end() || !it->is_string())
    throw DecryptionError(path, std::string("malformed envelope: '") + name + "' missing or not a string");
  auto bytes = crypto::base64_decode(it->get_ref<const std::string&>());
  if (!bytes || (size != 0 && bytes->size() != size))
    throw DecryptionError(path, std::string("malformed envelope: '") + name + "' is not base64 of " +
                                    (size ? std::to_string(size) + " bytes" : "the ciphertext"));
  return *bytes;
}

std::string member_id(const nlohmann::json& env, const char* name, const std::string& path) {
  const auto& v = env.at(name);
  if (!v.is_string() || !Keyring::valid_key_id(v.get_ref<const std::string&>()))
    throw DecryptionError(path, std::string("malformed envelope: '") + name + "' is not a key id");
  return v.get<std::string>();
}

}  // namespace

FieldEnvelope FieldEnvelope::seal(const SecretKey& key, KeyKind kind, const std::string& key_id,
                                  const MessageId& message_id, const std::string& path, const nlohmann::json& value,
                                  std::optional<BlindIndex> index) {
  FieldEnvelope env;
  env.kind_ = kind;
  env.key_id_ = key_id;
  env.index_ = std::move(index);
  crypto::random_bytes(env.nonce_.data(), env.nonce_.size());
  std::string plaintext = value.dump();
  env.ciphertext_ = crypto::gcm_seal(key, env.nonce_, env.aad(message_id, path), plaintext, env.tag_);
  OPENSSL_cleanse(plaintext.data(), plaintext.size());
  return env;
}

bool FieldEnvelope::is_envelope(const nlohmann::json& value) { return value.is_object() && value.contains("$enc"); }

FieldEnvelope FieldEnvelope::from_json(const nlohmann::json& value, const std::string& path) {
  if (!is_envelope(value)) throw DecryptionError(path, "expected an encrypted envelope, found a plain value");
  const auto& version = value.at("$enc");
  if (!version.is_string() || version.get_ref<const std::string&>() != kVersion)
    throw DecryptionError(path, "unsupported envelope version (this library reads \"v1\")");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const auto& k = it.key();
    if (k != "$enc" && k != "kid" && k != "skid" && k != "iv" && k != "ct" && k != "tag" && k != "bkid" && k != "bidx")
      throw DecryptionError(path, "malformed envelope: unknown member " + quoted_value(k, 32));
  }
  FieldEnvelope env;
  if (value.contains("kid") == value.contains("skid"))
    throw DecryptionError(path, "malformed envelope: exactly one of 'kid' and 'skid' is required");
  env.kind_ = value.contains("kid") ? KeyKind::kMaster : KeyKind::kSubject;
  env.key_id_ = member_id(value, env.kind_ == KeyKind::kMaster ? "kid" : "skid", path);
  auto nonce = member_bytes(value, "iv", env.nonce_.size(), path);
  std::memcpy(env.nonce_.data(), nonce.data(), env.nonce_.size());
  auto tag = member_bytes(value, "tag", env.tag_.size(), path);
  std::memcpy(env.tag_.data(), tag.data(), env.tag_.size());
  env.ciphertext_ = member_bytes(value, "ct", 0, path);
  if (value.contains("bkid") != value.contains("bidx"))
    throw DecryptionError(path, "malformed envelope: 'bkid' and 'bidx' come together");
  if (value.contains("bkid"))
    env.index_ = BlindIndex{member_id(value, "bkid", path), member_bytes(value, "bidx", 32, path)};
  return env;
}

nlohmann::json FieldEnvelope::to_json() const {
  nlohmann::json j;
  j["$enc"] = kVersion;
  j[kind_ == KeyKind::kMaster ? "kid" : "skid"] = key_id_;
  j["iv"] = crypto::base64_encode(raw(nonce_.data(), nonce_.size()));
  j["ct"] = crypto::base64_encode(ciphertext_);
  j["tag"] = crypto::base64_encode(raw(tag_.data(), tag_.size()));
  if (index_) {
    j["bkid"] = index_->key_id;
    j["bidx"] = crypto::base64_encode(index_->mac);
  }
  return j;
}

nlohmann::json FieldEnvelope::open(const SecretKey& key, const MessageId& message_id, const std::string& path) const {
  auto plaintext = crypto::gcm_open(key, nonce_, aad(message_id, path), ciphertext_, tag_);
  if (!plaintext)
    throw DecryptionError(path, "authentication failed for key " + quoted_value(key_id_) +
                                    " (tampered envelope, or one moved from another message or field)");
  PayloadJson parsed(*plaintext, /*exact_numbers=*/true);  // put back into a payload serialised again
  OPENSSL_cleanse(plaintext->data(), plaintext->size());
  if (!parsed.ok()) throw DecryptionError(path, "decrypted field: " + parsed.problem());
  return std::move(parsed.value());
}

std::string FieldEnvelope::blind_index(const SecretKey& key, const std::string& index_name,
                                       const nlohmann::json& value) {
  std::string input;
  crypto::append_length_prefixed(input, "outbox.blind-index.v1");
  crypto::append_length_prefixed(input, index_name);
  crypto::append_length_prefixed(input, value.dump());
  auto mac = crypto::hmac_sha256(key, input);
  OPENSSL_cleanse(input.data(), input.size());
  return std::string(raw(mac.data(), mac.size()));
}

std::string FieldEnvelope::aad(const MessageId& message_id, const std::string& path) const {
  std::string out;
  crypto::append_length_prefixed(out, "outbox.field.v1");
  crypto::append_length_prefixed(out, message_id.to_string());
  crypto::append_length_prefixed(out, path);
  crypto::append_length_prefixed(out, kind_ == KeyKind::kMaster ? "k" : "s");
  crypto::append_length_prefixed(out, key_id_);
  crypto::append_length_prefixed(out, index_ ? index_->key_id : "");
  crypto::append_length_prefixed(out, index_ ? index_->mac : "");
  return out;
}

}  // namespace outbox
