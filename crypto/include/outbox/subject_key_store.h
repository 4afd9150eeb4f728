#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

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
// A key row the store cannot verify (garbage, or wrapped under other bytes than its
// keyring holds for that master key id) is handled by who wrote it (created_by,
// set by the server, migration 0013): one this login wrote is its own fault and an
// error; one another login (or an older version) wrote is superseded: kept in
// outbox_subject_keys_superseded, never used to encrypt, and replaced by a fresh key,
// so a hostile producer login cannot make another subject's events fail
// (docs/SECURITY.md, "Subject keys").
//
// Thread safety: stateless after construction; one store may be shared by threads,
// each with its own transaction.
// REQUIRES: the schema is migrated by Migrator (version 13 or later).
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
  // erased; existing keys are checked before any row is written. A stored key that
  // does not verify and that another login created is superseded (see above); one
  // this login created throws DecryptionError, and KeyringMismatchError when other
  // logins' keys under that master key id do not verify either (this keyring holds
  // other bytes for the id): the producer is at fault, never its caller's subject.
  std::map<std::string, DataKey> acquire(pqxx::transaction_base& tx, const std::vector<std::string>& subjects) const;

  // The data key named `key_id` (an envelope's "skid"), also a superseded one, for
  // decryption. Throws
  // DecryptionError when unknown or when its wrapping does not verify, and
  // SubjectErasedError when the subject was erased.
  DataKey fetch(pqxx::transaction_base& tx, const std::string& key_id) const;

  // Crypto-shredding: destroys the subject's key. Returns true when a key was
  // destroyed, false when the subject had none or was already erased; a tombstone
  // is recorded either way so that no new key is minted for it later. A first event
  // for the subject in a transaction still open makes it wait for that transaction,
  // then destroy the key it committed. Commit `tx` to make it take effect, then
  // VACUUM the table (see docs/ENCRYPTION.md). Superseded keys of the subject are
  // destroyed too.
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

    // Subject keys that do not verify under the master key that wraps them (a bad
    // row a login wrote, or a keyring holding other bytes for that id): skipped, so
    // the rest still move. Every one met in this call; the call that rewraps nothing
    // has met them all.
    struct Unverifiable {
      std::string subject, key_id, wrapping_key_id, created_by;  // created_by "" when unknown
    };
    std::vector<Unverifiable> unverifiable;

    std::size_t skipped() const;
    // Empty when none; else e.g. "1 subject key does not verify under the master key
    // that wraps it and was not rewrapped: subject 'customer-3' (key 'sk_..', master
    // key 'k3', created by login 'evil'); ..." (at most 20 named).
    std::string unverifiable_text() const;
    // Empty when nothing was skipped; else, for an operator, e.g. "3 subject keys are
    // wrapped by master keys that are not in the keyring and were not rewrapped:
    // 'k0' (2), 'old' (1); add those keys to the keyring to rewrap them".
    std::string skipped_text() const;
  };

  // Re-wraps up to `limit` keys (current and superseded) that are wrapped by a master
  // key other than the active one, so an old master key can be retired after
  // rotation. Call it until `rewrapped` is 0. Keys wrapped by a master key missing
  // from the keyring, and keys that do not verify, are skipped and reported (a
  // batch full of them would otherwise stop every call; the rest still move).
  RewrapResult rewrap(pqxx::transaction_base& tx, std::size_t limit) const;

  // Whether the keyring's key for each master key id is the one that wrapped the
  // stored keys under that id: a keyring that keeps an id with other bytes would
  // report "all wrapped by the active key" while unwrapping none. Unwraps a random
  // sample of at most `per_login` keys per master key id and creating login (a
  // hostile login's garbage cannot hide the others' keys from the sample).
  struct KeyCheck {
    std::string master_key_id;
    std::size_t sampled = 0;   // stored keys tried
    std::size_t verified = 0;  // of which unwrapped
    // None of the sampled keys unwraps: this keyring's key for the id is not the one
    // that wrapped them.
    bool mismatch() const { return sampled > 0 && verified == 0; }
  };
  // One entry per master key id of the keyring that wraps stored keys, by id.
  std::vector<KeyCheck> check_keyring(pqxx::transaction_base& tx, std::size_t per_login = kSamplePerLogin) const;
  static constexpr std::size_t kSamplePerLogin = 8;

 private:
  struct Row;
  // erase() in `schema` (quoted).
  static bool erase_in(pqxx::transaction_base& tx, const std::string& schema, const std::string& subject);
  DataKey unwrap(const Row& row) const;
  // The key, or nothing when the row is erased, its master key is not in the
  // keyring or its wrapping does not verify.
  std::optional<SecretKey> try_unwrap(const Row& row) const;
  std::vector<Row> select_subjects(pqxx::transaction_base& tx, const std::vector<std::string>& subjects) const;
  // Puts a fresh key in place of `bad` (another login's, not verifying); throws when
  // this producer is at fault (its own row, or its keyring's bytes for the id).
  DataKey supersede(pqxx::transaction_base& tx, Row bad) const;
  void refuse_if_keyring_differs(pqxx::transaction_base& tx, const Row& bad) const;
  std::size_t rewrap_table(pqxx::transaction_base& tx, const std::string& table, std::size_t limit,
                           RewrapResult& result) const;
  std::string wrap(const std::string& subject, const std::string& key_id, const SecretKey& key) const;

  std::string schema_;      // quoted
  std::string table_;       // quoted schema + ".outbox_subject_keys"
  std::string superseded_;  // quoted schema + ".outbox_subject_keys_superseded"
  std::shared_ptr<const Keyring> keyring_;
};

}  // namespace outbox
