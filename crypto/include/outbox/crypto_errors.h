#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Error types of field encryption. Messages name the JSON path, the key id and the
// reason; they never contain a field's value (plain or decrypted) or key bytes.

#include <string>

#include "outbox/errors.h"
#include "outbox/one_line.h"

namespace outbox {

// A payload that breaks its event schema at enqueue (missing required field,
// wrong type, undeclared field). field() is the JSON path, e.g. "$.customer.email".
class SchemaValidationError : public ValidationError {
 public:
  SchemaValidationError(const std::string& path, const std::string& what) : ValidationError(path, what) {}
  const std::string& path() const { return field(); }
};

// A bad keyring (file mode, unknown setting, key of the wrong length or format).
// field() names where: "keyring FILE", or "keyring FILE: key 'k2'".
class KeyringError : public ValidationError {
 public:
  using ValidationError::ValidationError;
};

// An encrypted field that cannot be restored: tampered nonce, tag or ciphertext,
// an envelope moved to another message or field, an unknown key id, a malformed
// envelope, or a decrypted payload that breaks its schema. Retrying cannot help:
// the consumer runner dead-letters the message at once.
class DecryptionError : public PermanentError {
 public:
  DecryptionError(const std::string& path, const std::string& what)
      : PermanentError(one_line(path + ": " + what)), path_(one_line(path)) {}
  // JSON path of the field at fault ("$" for the payload as a whole).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The field belongs to a data subject whose key was erased (crypto-shredding):
// it can never be decrypted again. At enqueue, a new event for an erased subject
// throws this as well, so no fresh key is minted for an erased person.
class SubjectErasedError : public DecryptionError {
 public:
  using DecryptionError::DecryptionError;
};

// The keyring holds other bytes for a master key id than the key that wrapped the
// subject keys stored under it (a key id reused for a new key): field() names the
// key id, never a byte of either key. A producer that meets it is at fault itself
// (its keyring), so its enqueue fails rather than replace other subjects' keys.
class KeyringMismatchError : public DecryptionError {
 public:
  using DecryptionError::DecryptionError;
};

}  // namespace outbox
