#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Keyring: the master keys that encrypt sensitive fields, by key id.

#include <map>
#include <string>
#include <vector>

#include "outbox/secret_key.h"

namespace outbox {

// Keys by id. One active key encrypts; every listed key decrypts, so rotation is
// "add a key and make it active" and older messages still decrypt. An optional
// second set of keys computes blind indexes (HMAC-SHA-256), kept apart from the
// encryption keys. The text form (file or environment variable) is YAML:
//
//   active: k2
//   keys:
//     k1: <base64 of 32 random bytes>
//     k2: <base64 of 32 random bytes>
//   blind_index:            # optional
//     active: b1
//     keys:
//       b1: <base64 of 32 random bytes>
//
// Key ids: 1-64 of [A-Za-z0-9._-]. Errors (KeyringError) name the source and the
// key id, never key bytes.
// Thread safety: immutable after construction; share it (e.g. shared_ptr<const>)
// between threads freely. Move-only: key material is never copied.
class Keyring {
 public:
  // Parses the YAML text; `source` names it in errors (a file path, "$OUTBOX_KEYRING").
  static Keyring parse(const std::string& yaml, const std::string& source);
  // Reads a keyring file. Refused unless it is a regular file with mode 0600 or
  // stricter (no group or other bits), checked on the opened descriptor.
  static Keyring load_file(const std::string& path);
  // Reads the YAML from an environment variable (flow style fits on one line:
  // `{active: k1, keys: {k1: ...}}`). Throws KeyringError when unset or bad.
  static Keyring from_env(const std::string& variable);
  // Creates a new keyring file holding one random key `key_id` (active) and one
  // random blind-index key "b1", with mode 0600. Never overwrites: throws
  // KeyringError if `path` exists.
  static void create_file(const std::string& path, const std::string& key_id);

  Keyring(Keyring&&) noexcept = default;
  Keyring& operator=(Keyring&&) noexcept = default;
  Keyring(const Keyring&) = delete;
  Keyring& operator=(const Keyring&) = delete;

  const std::string& active_id() const { return active_; }
  const SecretKey& active_key() const { return keys_.at(active_); }
  // nullptr when `id` is not in the keyring.
  const SecretKey* find(const std::string& id) const;
  std::vector<std::string> key_ids() const;

  bool has_index_keys() const { return !index_active_.empty(); }
  // REQUIRES: has_index_keys().
  const std::string& index_active_id() const { return index_active_; }
  const SecretKey& index_active_key() const { return index_keys_.at(index_active_); }
  const SecretKey* find_index_key(const std::string& id) const;

  // Whether `id` is a well-formed key id.
  static bool valid_key_id(const std::string& id);

 private:
  Keyring() = default;
  std::string active_;
  std::map<std::string, SecretKey> keys_;
  std::string index_active_;
  std::map<std::string, SecretKey> index_keys_;
};

}  // namespace outbox
