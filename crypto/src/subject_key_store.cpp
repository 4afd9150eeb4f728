#include "outbox/subject_key_store.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <pqxx/pqxx>

#include "crypto_primitives.h"
#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/pg_array.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox {

struct SubjectKeyStore::Row {
  std::string subject;
  std::string key_id;
  std::optional<std::string> wrapping_key_id;
  std::optional<std::string> wrapped;  // nonce || ciphertext || tag; none once erased
};

namespace {

constexpr const char* kColumns = "subject, key_id, wrapping_key_id, wrapped_key";
constexpr std::size_t kWrappedBytes = crypto::kNonceBytes + SecretKey::kBytes + crypto::kTagBytes;

std::string wrap_aad(const std::string& subject, const std::string& key_id, const std::string& wrapping_id) {
  std::string aad;
  crypto::append_length_prefixed(aad, "outbox.subject-key.v1");
  crypto::append_length_prefixed(aad, subject);
  crypto::append_length_prefixed(aad, key_id);
  crypto::append_length_prefixed(aad, wrapping_id);
  return aad;
}

std::string new_key_id() {
  std::uint8_t r[16];
  crypto::random_bytes(r, sizeof r);
  static const char* digits = "0123456789abcdef";
  std::string id = "sk_";
  for (auto b : r) {
    id.push_back(digits[b >> 4]);
    id.push_back(digits[b & 0xF]);
  }
  return id;
}

}  // namespace

SubjectKeyStore::SubjectKeyStore(std::string schema, std::shared_ptr<const Keyring> keyring)
    : table_(quoted_identifier(schema, "schema") + ".outbox_subject_keys"), keyring_(std::move(keyring)) {
  if (!keyring_) throw ValidationError("keyring", "a subject key store needs a keyring");
}

std::string SubjectKeyStore::wrap(const std::string& subject, const std::string& key_id, const SecretKey& key) const {
  crypto::Nonce nonce;
  crypto::random_bytes(nonce.data(), nonce.size());
  crypto::Tag tag;
  auto ct = crypto::gcm_seal(keyring_->active_key(), nonce, wrap_aad(subject, key_id, keyring_->active_id()),
                             std::string_view(reinterpret_cast<const char*>(key.data()), SecretKey::kBytes), tag);
  std::string out(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  out += ct;
  out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return out;
}

SubjectKeyStore::DataKey SubjectKeyStore::unwrap(const Row& row) const {
  const std::string where = "subject key " + quoted_value(row.key_id);
  if (!row.wrapped)
    throw SubjectErasedError(where, "the data subject was erased; its fields can no longer be decrypted");
  const SecretKey* master = keyring_->find(*row.wrapping_key_id);
  if (!master)
    throw DecryptionError(where, "wrapped by master key " + quoted_value(*row.wrapping_key_id) +
                                     ", which is not in the keyring");
  if (row.wrapped->size() != kWrappedBytes) throw DecryptionError(where, "stored wrapped key has the wrong length");
  crypto::Nonce nonce;
  crypto::Tag tag;
  std::memcpy(nonce.data(), row.wrapped->data(), nonce.size());
  std::memcpy(tag.data(), row.wrapped->data() + nonce.size() + SecretKey::kBytes, tag.size());
  auto raw = crypto::gcm_open(*master, nonce, wrap_aad(row.subject, row.key_id, *row.wrapping_key_id),
                              std::string_view(*row.wrapped).substr(nonce.size(), SecretKey::kBytes), tag);
  if (!raw)
    throw DecryptionError(where, "the stored wrapped key does not verify under master key " +
                                     quoted_value(*row.wrapping_key_id));
  DataKey key{row.key_id, SecretKey::from_bytes(*raw)};
  OPENSSL_cleanse(raw->data(), raw->size());
  return key;
}

namespace {

// Columns in kColumns order. A template because Row is private to the class.
template <class RowType>
RowType row_from(const pqxx::row& r) {
  RowType row;
  row.subject = r[0].as<std::string>();
  row.key_id = r[1].as<std::string>();
  if (!r[2].is_null()) row.wrapping_key_id = r[2].as<std::string>();
  if (!r[3].is_null()) row.wrapped = outbox::pgx::bytea_of(r[3]);
  return row;
}

}  // namespace

std::map<std::string, SubjectKeyStore::DataKey> SubjectKeyStore::acquire(
    pqxx::transaction_base& tx, const std::vector<std::string>& subjects) const {
  std::vector<std::string> wanted(subjects);
  std::sort(wanted.begin(), wanted.end());  // one lock order for every writer: no deadlock
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::map<std::string, DataKey> keys;
  if (wanted.empty()) return keys;

  auto select = [&](const std::vector<std::string>& which) {
    std::vector<Row> rows;
    for (const auto& r : outbox::pgx::exec_params(tx,
                                                  std::string("SELECT ") + kColumns + " FROM " + table_ +
                                                      " WHERE subject = ANY($1::text[])",
                                                  pg::text_array(which)))
      rows.push_back(row_from<Row>(r));
    return rows;
  };
  auto take = [&](const std::vector<Row>& rows) {
    for (const auto& row : rows) {
      if (!row.wrapped)
        throw SubjectErasedError("subject " + quoted_value(row.subject),
                                 "was erased; no new event may carry its sensitive fields");
      keys.emplace(row.subject, unwrap(row));
    }
  };
  take(select(wanted));  // every erased subject is refused here, before any write

  std::vector<std::string> missing, ids, wrapping, wrapped;
  std::map<std::string, DataKey> fresh;
  for (const auto& s : wanted) {
    if (keys.count(s)) continue;
    DataKey k{new_key_id(), SecretKey::random()};
    missing.push_back(s);
    ids.push_back(k.key_id);
    wrapping.push_back(keyring_->active_id());
    wrapped.push_back(wrap(s, k.key_id, k.key));
    fresh.emplace(s, std::move(k));
  }
  if (missing.empty()) return keys;
  std::vector<std::string_view> wrapped_views(wrapped.begin(), wrapped.end());
  auto inserted = outbox::pgx::exec_params(
      tx,
      "INSERT INTO " + table_ + " (" + kColumns +
          ") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[]) "
          "ON CONFLICT (subject) DO NOTHING RETURNING subject",
      pg::text_array(missing), pg::text_array(ids), pg::text_array(wrapping), pg::bytea_array(wrapped_views));
  for (const auto& r : inserted) {
    auto s = r[0].as<std::string>();
    keys.emplace(s, std::move(fresh.at(s)));
  }
  // A concurrent transaction created the others first (and committed): use its keys.
  std::vector<std::string> raced;
  for (const auto& s : missing)
    if (!keys.count(s)) raced.push_back(s);
  if (!raced.empty()) take(select(raced));
  for (const auto& s : raced)
    if (!keys.count(s))
      throw std::runtime_error("subject key for a subject vanished concurrently; retry the transaction");
  return keys;
}

SubjectKeyStore::DataKey SubjectKeyStore::fetch(pqxx::transaction_base& tx, const std::string& key_id) const {
  auto r = outbox::pgx::exec_params(tx, std::string("SELECT ") + kColumns + " FROM " + table_ + " WHERE key_id = $1",
                                    key_id);
  if (r.empty()) throw DecryptionError("subject key " + quoted_value(key_id), "unknown data key id");
  return unwrap(row_from<Row>(r[0]));
}

bool SubjectKeyStore::erase(pqxx::transaction_base& tx, const std::string& subject) const {
  return erase_in(tx, table_, subject);
}

bool SubjectKeyStore::erase(pqxx::transaction_base& tx, const std::string& schema, const std::string& subject) {
  return erase_in(tx, quoted_identifier(schema, "schema") + ".outbox_subject_keys", subject);
}

bool SubjectKeyStore::erase_in(pqxx::transaction_base& tx, const std::string& table, const std::string& subject) {
  if (subject.empty()) throw ValidationError("subject", "must not be empty");
  // One statement: a first event for the subject whose key row is not committed yet
  // makes the insert wait for it, then erase the key it committed (an UPDATE first
  // and a tombstone after would find no row, then a conflict, and erase nothing).
  // A row with a fresh key id is the new tombstone; no row, an erased subject.
  const auto key_id = new_key_id();
  auto r = outbox::pgx::exec_params(tx,
                                    "INSERT INTO " + table +
                                        " AS k (subject, key_id, erased_at) VALUES ($1, $2, now()) "
                                        "ON CONFLICT (subject) DO UPDATE "
                                        "SET wrapped_key = NULL, wrapping_key_id = NULL, erased_at = now() "
                                        "WHERE k.erased_at IS NULL RETURNING k.key_id <> $2",
                                    subject, key_id);
  return !r.empty() && r[0][0].as<bool>();
}

SubjectKeyStore::RewrapResult SubjectKeyStore::rewrap(pqxx::transaction_base& tx, std::size_t limit) const {
  RewrapResult result;
  // Only keys the keyring can unwrap are taken: the others would fail every call at
  // the same rows (they sort first whatever the limit) and stop the rotation.
  const auto held = pg::text_array(keyring_->key_ids());
  auto rows = outbox::pgx::exec_params(tx,
                                       std::string("SELECT ") + kColumns + " FROM " + table_ +
                                           " WHERE wrapped_key IS NOT NULL AND wrapping_key_id <> $1 "
                                           "AND wrapping_key_id = ANY($3::text[]) "
                                           "ORDER BY subject LIMIT $2 FOR UPDATE",
                                       keyring_->active_id(), static_cast<long long>(limit), held);
  for (const auto& r : rows) {
    auto row = row_from<Row>(r);
    auto key = unwrap(row);
    outbox::pgx::exec_params(tx,
                             "UPDATE " + table_ +
                                 " SET wrapping_key_id = $2, wrapped_key = $3::bytea WHERE subject = $1",
                             row.subject, keyring_->active_id(),
                             outbox::pgx::bytea(wrap(row.subject, row.key_id, key.key)));
  }
  result.rewrapped = rows.size();
  for (const auto& r :
       outbox::pgx::exec_params(tx,
                                "SELECT wrapping_key_id, count(*) FROM " + table_ +
                                    " WHERE wrapped_key IS NOT NULL AND wrapping_key_id <> ALL($1::text[]) "
                                    "GROUP BY wrapping_key_id",
                                held))
    result.skipped_by_master_key.emplace(r[0].as<std::string>(), r[1].as<std::size_t>());
  return result;
}

std::size_t SubjectKeyStore::RewrapResult::skipped() const {
  std::size_t n = 0;
  for (const auto& [id, count] : skipped_by_master_key) n += count;
  return n;
}

std::string SubjectKeyStore::RewrapResult::skipped_text() const {
  if (skipped_by_master_key.empty()) return "";
  std::string ids;
  for (const auto& [id, count] : skipped_by_master_key)
    ids += (ids.empty() ? "" : ", ") + quoted_value(id) + " (" + std::to_string(count) + ")";
  return std::to_string(skipped()) + " subject key" + (skipped() == 1 ? " is" : "s are") +
         " wrapped by master keys that are not in the keyring and were not rewrapped: " + ids +
         "; add those keys to the keyring to rewrap them";
}

}  // namespace outbox
