#pragma once
// The commands of outbox-keys, the operator's tool for the field-encryption keys:
// check a keyring, see which master keys wrap the subject keys, rewrap them under
// the active key after a rotation (docs/ENCRYPTION.md, "Rotation"), and erase a
// subject's key (crypto-shredding).

#include <atomic>
#include <cstddef>
#include <ostream>
#include <string>

namespace outbox::keys_tool {

// What the command line gave (outbox_keys_main.cpp parses it with CLI11).
struct KeysOptions {
  std::string schema;        // the outbox schema holding outbox_subject_keys (optional for check)
  std::string keyring_file;  // --keyring PATH (mode 0600), or
  std::string keyring_env;   // --keyring-env VAR (the YAML in an environment variable)
  // The environment variable holding the PostgreSQL connection string: never on the
  // command line, where `ps` shows it to every user of the host.
  std::string dsn_env = "OUTBOX_PG_DSN";
  std::size_t batch = 500;  // rewrap: subject keys per transaction
  std::string subject;      // erase: the data subject (e.g. a customer id)
};

// Exit codes, the same for every command.
constexpr int kOk = 0;
constexpr int kFailed = 1;      // an error, said on `err`: nothing half-written
constexpr int kUsage = 2;       // the command line is wrong
constexpr int kIncomplete = 3;  // rewrap: keys of master keys missing from the keyring, or keys that do not
                                // verify, remain

// Loads the keyring and prints its key ids (never key bytes). With a schema, also
// unwraps a sample of the stored subject keys under each of its ids (at most
// SubjectKeyStore::kSamplePerLogin per id and creating login) and fails (kFailed)
// naming every id whose key unwraps none of them: key material, not only ids.
int check(const KeysOptions& options, std::ostream& out, std::ostream& err);
// Counts the subject keys by the master key that wraps them, and says which the
// keyring holds, which is active, and what is left to do; with a keyring, checks its
// key material as `check` does first (kFailed on a mismatch).
int status(const KeysOptions& options, std::ostream& out, std::ostream& err);
// Rewraps the subject keys under the keyring's active key, `batch` per committed
// transaction, with a progress line per batch on `err`, until none is left or `stop`
// is set (between batches: each batch is all or nothing). Refuses to start (kFailed,
// nothing changed) when the keyring's key material does not match the stored keys;
// keys that do not verify are skipped, named at the end, and make it kIncomplete.
int rewrap(const KeysOptions& options, const std::atomic<bool>& stop, std::ostream& out, std::ostream& err);

// Crypto-shredding of one subject (an erasure request): destroys its data key, so
// its encrypted fields can no longer be decrypted anywhere, and leaves a tombstone
// so no new key is minted for it. Needs no keyring. Irreversible.
int erase(const KeysOptions& options, std::ostream& out, std::ostream& err);

}  // namespace outbox::keys_tool
