#pragma once
// SubjectKeyStore: per-subject data keys for crypto-shredding, stored wrapped in
// SCHEMA.outbox_subject_keys (migration 0003).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outbox/keyring.h"
#include "outbox/secret_key.h"

namespace pqxx {
class transaction_base;
}

namespace outbox {

// Each data subject (say a customer id) gets one random data key the first time an
// event about it is enqueued; its sensitive fields are encrypted under that key,
// and the key is stored only wrapped (AES-256-GCM) by the keyring's active master
// key, with the subject and key id in the AAD. erase() destroys the wrapped key:
// afterwards no copy of those fields (outbox, broker, consumer stores) can be
// decrypted with any keyring.
//
// Thread safety: stateless after construction; one store may be shared by threads,
// each with its own transaction.
// REQUIRES: the schema is migrated by Migrator (version 3 or later).
class SubjectKeyStore {
 public:
  // Throws ValidationError when `schema` is not a plain identifier.
  SubjectKeyStore(std::string schema, std::shared_ptr<const Keyring> keyring);

  struct DataKey {
    std::string key_id;  // "sk_" + 32 hex digits; the envelope's "skid"
    SecretKey key;
  };

  // A key for every subject, creating the missing ones in `tx` (so they vanish if
  // it rolls back). Throws SubjectErasedError naming the subject when one was
  // erased; existing keys are checked before any row is written.
  std::map<std::string, DataKey> acquire(pqxx::transaction_base& tx, const std::vector<std::string>& subjects) const;

  // The data key named `key_id` (an envelope's "skid"), for decryption. Throws
  // DecryptionError when unknown or when its wrapping does not verify, and
  // SubjectErasedError when the subject was erased.
  DataKey fetch(pqxx::transaction_base& tx, const std::string& key_id) const;

  // Crypto-shredding: destroys the subject's key. Returns true when a key was
  // destroyed, false when the subject had none or was already erased; a tombstone
  // is recorded either way so that no new key is minted for it later. A first event
  // for the subject in a transaction still open makes it wait for that transaction,
  // then destroy the key it committed. Commit `tx` to make it take effect, then
  // VACUUM the table (see docs/ENCRYPTION.md).
  bool erase(pqxx::transaction_base& tx, const std::string& subject) const;
  // The same without a keyring: erasure destroys a key and needs none, so whoever
  // carries out an erasure request need not hold the master keys. Throws
  // ValidationError when `schema` is not a plain identifier or `subject` is empty.
  static bool erase(pqxx::transaction_base& tx, const std::string& schema, const std::string& subject);

  // What one rewrap() call did. Key ids only, never key bytes.
  struct RewrapResult {
    // Subject keys moved to the active master key in this call (at most `limit`).
    std::size_t rewrapped = 0;
    // Subject keys wrapped by a master key that is not in the keyring (removed before
    // its keys were rewrapped), by that master key's id: they cannot be unwrapped, so
    // they are left untouched. Counted over the whole table, not only up to `limit`.
    std::map<std::string, std::size_t> skipped_by_master_key;

    std::size_t skipped() const;
    // Empty when nothing was skipped; else, for an operator, e.g. "3 subject keys are
    // wrapped by master keys that are not in the keyring and were not rewrapped:
    // 'k0' (2), 'old' (1); add those keys to the keyring to rewrap them".
    std::string skipped_text() const;
  };

  // Re-wraps up to `limit` keys that are wrapped by a master key other than the
  // active one, so an old master key can be retired after rotation. Call it until
  // `rewrapped` is 0. Keys wrapped by a master key missing from the keyring are
  // skipped and reported (a batch full of them would otherwise stop every call; the
  // rest still move). Throws DecryptionError when a key's wrapping does not verify
  // under a master key the keyring has (a tampered row), rewrapping nothing.
  RewrapResult rewrap(pqxx::transaction_base& tx, std::size_t limit) const;

 private:
  struct Row;
  // erase() on `table` (schema-qualified, quoted).
  static bool erase_in(pqxx::transaction_base& tx, const std::string& table, const std::string& subject);
  DataKey unwrap(const Row& row) const;
  std::string wrap(const std::string& subject, const std::string& key_id, const SecretKey& key) const;

  std::string table_;  // quoted schema + ".outbox_subject_keys"
  std::shared_ptr<const Keyring> keyring_;
};

}  // namespace outbox
