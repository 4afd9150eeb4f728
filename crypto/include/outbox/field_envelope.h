#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// FieldEnvelope: one sensitive value, sealed with AES-256-GCM, as it appears in
// the payload in place of the value.

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "outbox/message_id.h"
#include "outbox/secret_key.h"

namespace outbox {

// JSON form (version "v1"; base64 is standard with padding):
//   {"$enc":"v1","kid":"k2","iv":"<12 bytes>","ct":"<ciphertext>","tag":"<16 bytes>"}
// "skid" instead of "kid" when the key is a data subject's key (crypto-shredding),
// and "bkid" + "bidx" (HMAC-SHA-256 blind index) when the field is searchable.
// The plaintext is the value's JSON text, so strings, numbers, objects and arrays
// all round-trip with their type. The AAD binds, length-prefixed:
//   "outbox.field.v1", message id, JSON path, key kind, key id, bkid, bidx
// so an envelope copied into another message or field, or given another key id or
// blind index, fails authentication. Every seal draws a fresh random 96-bit nonce.
// Thread safety: a value type; seal/open are safe from any thread.
class FieldEnvelope {
 public:
  enum class KeyKind { kMaster, kSubject };
  static constexpr const char* kVersion = "v1";

  struct BlindIndex {
    std::string key_id;  // bkid
    std::string mac;     // raw 32 bytes
  };

  static FieldEnvelope seal(const SecretKey& key, KeyKind kind, const std::string& key_id, const MessageId& message_id,
                            const std::string& path, const nlohmann::json& value,
                            std::optional<BlindIndex> index = std::nullopt);

  // Whether `value` is meant as an envelope (an object with "$enc").
  static bool is_envelope(const nlohmann::json& value);
  // Strict parse: exactly the known members, well-formed base64 of the right sizes.
  // Throws DecryptionError naming `path` when malformed.
  static FieldEnvelope from_json(const nlohmann::json& value, const std::string& path);
  nlohmann::json to_json() const;

  // Decrypts and parses the value. Throws DecryptionError naming `path` when the
  // tag does not verify (tampering, wrong key, other message or field).
  nlohmann::json open(const SecretKey& key, const MessageId& message_id, const std::string& path) const;

  // The blind index of `value` under `key` for index `index_name` (raw 32 bytes):
  // HMAC-SHA-256 over "outbox.blind-index.v1", the index name and the value's JSON
  // text. A consumer computes it for the value it looks for and compares.
  static std::string blind_index(const SecretKey& key, const std::string& index_name, const nlohmann::json& value);

  KeyKind key_kind() const { return kind_; }
  const std::string& key_id() const { return key_id_; }
  const std::array<std::uint8_t, 12>& nonce() const { return nonce_; }
  const std::optional<BlindIndex>& index() const { return index_; }

 private:
  std::string aad(const MessageId& message_id, const std::string& path) const;

  KeyKind kind_ = KeyKind::kMaster;
  std::string key_id_;
  std::array<std::uint8_t, 12> nonce_{};
  std::string ciphertext_;
  std::array<std::uint8_t, 16> tag_{};
  std::optional<BlindIndex> index_;
};

}  // namespace outbox
