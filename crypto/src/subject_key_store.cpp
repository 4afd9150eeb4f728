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
  std::optional<std::string> wrapped;     // nonce || ciphertext || tag; none once erased
  std::optional<std::string> created_by;  // the login that created it; none when unknown (before 0013)
  bool mine = false;                      // created by this session's login
};

namespace {

constexpr const char* kColumns = "subject, key_id, wrapping_key_id, wrapped_key";
// kColumns and who created the row (migration 0013).
constexpr const char* kRowColumns =
    "subject, key_id, wrapping_key_id, wrapped_key, created_by, created_by IS NOT DISTINCT FROM session_user";
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
    : schema_(quoted_identifier(schema, "schema")),
      table_(schema_ + ".outbox_subject_keys"),
      superseded_(schema_ + ".outbox_subject_keys_superseded"),
      keyring_(std::move(keyring)) {
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

std::optional<SecretKey> SubjectKeyStore::try_unwrap(const Row& row) const {
  if (!row.wrapped || !row.wrapping_key_id) return std::nullopt;
  const SecretKey* master = keyring_->find(*row.wrapping_key_id);
  if (!master || row.wrapped->size() != kWrappedBytes) return std::nullopt;
  crypto::Nonce nonce;
  crypto::Tag tag;
  std::memcpy(nonce.data(), row.wrapped->data(), nonce.size());
  std::memcpy(tag.data(), row.wrapped->data() + nonce.size() + SecretKey::kBytes, tag.size());
  auto raw = crypto::gcm_open(*master, nonce, wrap_aad(row.subject, row.key_id, *row.wrapping_key_id),
                              std::string_view(*row.wrapped).substr(nonce.size(), SecretKey::kBytes), tag);
  if (!raw) return std::nullopt;
  auto key = SecretKey::from_bytes(*raw);
  OPENSSL_cleanse(raw->data(), raw->size());
  return key;
}

SubjectKeyStore::DataKey SubjectKeyStore::unwrap(const Row& row) const {
  const std::string where = "subject key " + quoted_value(row.key_id);
  if (!row.wrapped)
    throw SubjectErasedError(where, "the data subject was erased; its fields can no longer be decrypted");
  if (!keyring_->find(*row.wrapping_key_id))
    throw DecryptionError(where, "wrapped by master key " + quoted_value(*row.wrapping_key_id) +
                                     ", which is not in the keyring");
  if (row.wrapped->size() != kWrappedBytes) throw DecryptionError(where, "stored wrapped key has the wrong length");
  auto key = try_unwrap(row);
  if (!key)
    throw DecryptionError(where, "the stored wrapped key does not verify under master key " +
                                     quoted_value(*row.wrapping_key_id));
  return DataKey{row.key_id, std::move(*key)};
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
  if (r.size() > 5) {  // kRowColumns
    if (!r[4].is_null()) row.created_by = r[4].as<std::string>();
    row.mine = r[5].as<bool>();
  }
  return row;
}

}  // namespace

std::vector<SubjectKeyStore::Row> SubjectKeyStore::select_subjects(pqxx::transaction_base& tx,
                                                                   const std::vector<std::string>& subjects) const {
  std::vector<Row> rows;
  for (const auto& r : outbox::pgx::exec_params(tx,
                                                std::string("SELECT ") + kRowColumns + " FROM " + table_ +
                                                    " WHERE subject = ANY($1::text[])",
                                                pg::text_array(subjects)))
    rows.push_back(row_from<Row>(r));
  return rows;
}

std::map<std::string, SubjectKeyStore::DataKey> SubjectKeyStore::acquire(
    pqxx::transaction_base& tx, const std::vector<std::string>& subjects) const {
  std::vector<std::string> wanted(subjects);
  std::sort(wanted.begin(), wanted.end());  // one lock order for every writer: no deadlock
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::map<std::string, DataKey> keys;
  if (wanted.empty()) return keys;

  std::vector<Row> foreign;  // stored keys that do not verify, written by another login
  auto take = [&](const std::vector<Row>& rows) {
    for (const auto& row : rows)
      if (!row.wrapped)
        throw SubjectErasedError("subject " + quoted_value(row.subject),
                                 "was erased; no new event may carry its sensitive fields");
    for (const auto& row : rows) {
      if (auto key = try_unwrap(row)) {
        keys.emplace(row.subject, DataKey{row.key_id, std::move(*key)});
      } else if (row.mine) {
        unwrap(row);  // throws: the reason, naming the key and its master key
      } else {
        foreign.push_back(row);
      }
    }
  };
  take(select_subjects(tx, wanted));  // every erased subject is refused here, before any write

  std::vector<std::string> missing, ids, wrapping, wrapped;
  std::map<std::string, DataKey> fresh;
  for (const auto& s : wanted) {
    if (keys.count(s) || std::any_of(foreign.begin(), foreign.end(), [&](const Row& r) { return r.subject == s; }))
      continue;
    DataKey k{new_key_id(), SecretKey::random()};
    missing.push_back(s);
    ids.push_back(k.key_id);
    wrapping.push_back(keyring_->active_id());
    wrapped.push_back(wrap(s, k.key_id, k.key));
    fresh.emplace(s, std::move(k));
  }
  if (!missing.empty()) {
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
    if (!raced.empty()) take(select_subjects(tx, raced));
    for (const auto& s : raced)
      if (!keys.count(s) && std::none_of(foreign.begin(), foreign.end(), [&](const Row& r) { return r.subject == s; }))
        throw std::runtime_error("subject key for a subject vanished concurrently; retry the transaction");
  }
  for (auto& row : foreign) {
    const auto subject = row.subject;
    keys.emplace(subject, supersede(tx, std::move(row)));
  }
  return keys;
}

void SubjectKeyStore::refuse_if_keyring_differs(pqxx::transaction_base& tx, const Row& bad) const {
  // Keys under the same master key id that the bad row's creator did not write (this
  // login's own among them: a keyring changed under a reused id meets its own older
  // keys first): when some exist and none unwraps, this keyring is what differs. The
  // bad row's creator is no witness: a hostile login could write any number of bad
  // rows to make an honest producer doubt its keyring. So a login whose keyring is
  // wrong and that meets only one other login's keys cannot tell; it supersedes, which
  // loses nothing (the old key is kept) and `outbox-keys check --schema` reports it.
  // The LIMITs here go as text (the server types $n): libpqxx 7.10's params::append of
  // an integer trips GCC 14's -Wmaybe-uninitialized, a false positive in std::variant.
  auto rows = outbox::pgx::exec_params(tx,
                                       std::string("SELECT ") + kRowColumns + " FROM " + table_ +
                                           " WHERE wrapping_key_id = $1 AND wrapped_key IS NOT NULL "
                                           "AND created_by IS DISTINCT FROM NULLIF($2, '') LIMIT $3",
                                       *bad.wrapping_key_id, bad.created_by.value_or(""),
                                       std::to_string(kSamplePerLogin));
  if (rows.empty()) return;
  for (const auto& r : rows)
    if (try_unwrap(row_from<Row>(r))) return;
  throw KeyringMismatchError("master key " + quoted_value(*bad.wrapping_key_id),
                             "this keyring's key for the id unwraps none of " + std::to_string(rows.size()) +
                                 " subject keys other logins stored under it: the keyring holds other bytes for " +
                                 quoted_value(*bad.wrapping_key_id) + " than the key that wrapped them");
}

SubjectKeyStore::DataKey SubjectKeyStore::supersede(pqxx::transaction_base& tx, Row bad) const {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (bad.wrapping_key_id && keyring_->find(*bad.wrapping_key_id)) refuse_if_keyring_differs(tx, bad);
    DataKey fresh{new_key_id(), SecretKey::random()};
    auto r = outbox::pgx::exec_params(tx, "SELECT " + schema_ + ".supersede_subject_key($1, $2, $3, $4, $5::bytea)",
                                      bad.subject, bad.key_id, fresh.key_id, keyring_->active_id(),
                                      outbox::pgx::bytea(wrap(bad.subject, fresh.key_id, fresh.key)));
    if (r[0][0].as<bool>()) return fresh;
    // The row changed since it was read (erased, or superseded by another producer).
    auto rows = select_subjects(tx, {bad.subject});
    if (rows.empty()) break;
    if (!rows[0].wrapped)
      throw SubjectErasedError("subject " + quoted_value(bad.subject),
                               "was erased; no new event may carry its sensitive fields");
    if (auto key = try_unwrap(rows[0])) return DataKey{rows[0].key_id, std::move(*key)};
    if (rows[0].mine) return unwrap(rows[0]);  // throws
    bad = std::move(rows[0]);
  }
  throw std::runtime_error("subject key for subject " + quoted_value(bad.subject) +
                           " changed concurrently three times; retry the transaction");
}

SubjectKeyStore::DataKey SubjectKeyStore::fetch(pqxx::transaction_base& tx, const std::string& key_id) const {
  auto r = outbox::pgx::exec_params(tx,
                                    std::string("SELECT ") + kColumns + " FROM " + table_ + " WHERE key_id = $1 " +
                                        "UNION ALL SELECT " + kColumns + " FROM " + superseded_ + " WHERE key_id = $1",
                                    key_id);
  if (r.empty()) throw DecryptionError("subject key " + quoted_value(key_id), "unknown data key id");
  return unwrap(row_from<Row>(r[0]));
}

bool SubjectKeyStore::erase(pqxx::transaction_base& tx, const std::string& subject) const {
  return erase_in(tx, schema_, subject);
}

bool SubjectKeyStore::erase(pqxx::transaction_base& tx, const std::string& schema, const std::string& subject) {
  return erase_in(tx, quoted_identifier(schema, "schema"), subject);
}

bool SubjectKeyStore::erase_in(pqxx::transaction_base& tx, const std::string& schema, const std::string& subject) {
  if (subject.empty()) throw ValidationError("subject", "must not be empty");
  // One statement: a first event for the subject whose key row is not committed yet
  // makes the insert wait for it, then erase the key it committed (an UPDATE first
  // and a tombstone after would find no row, then a conflict, and erase nothing).
  // A row with a fresh key id is the new tombstone; no row, an erased subject.
  const auto key_id = new_key_id();
  auto r = outbox::pgx::exec_params(tx,
                                    "INSERT INTO " + schema +
                                        ".outbox_subject_keys AS k (subject, key_id, erased_at) "
                                        "VALUES ($1, $2, now()) "
                                        "ON CONFLICT (subject) DO UPDATE "
                                        "SET wrapped_key = NULL, wrapping_key_id = NULL, erased_at = now() "
                                        "WHERE k.erased_at IS NULL RETURNING k.key_id <> $2",
                                    subject, key_id);
  // After the current row is locked (above): a supersede of it has committed, or
  // waits and then finds it erased.
  auto old = outbox::pgx::exec_params(tx,
                                      "UPDATE " + schema +
                                          ".outbox_subject_keys_superseded "
                                          "SET wrapped_key = NULL, wrapping_key_id = NULL, erased_at = now() "
                                          "WHERE subject = $1 AND erased_at IS NULL",
                                      subject);
  return (!r.empty() && r[0][0].as<bool>()) || old.affected_rows() > 0;
}

std::size_t SubjectKeyStore::rewrap_table(pqxx::transaction_base& tx, const std::string& table, std::size_t limit,
                                          RewrapResult& result) const {
  // Only keys the keyring can unwrap are taken: the others would fail every call at
  // the same rows and stop the rotation. Pages by key id past the ones that do not
  // verify, which are named and left as they are.
  const auto held = pg::text_array(keyring_->key_ids());
  std::size_t done = 0;
  std::string after;
  while (done < limit) {
    auto rows = outbox::pgx::exec_params(tx,
                                         std::string("SELECT ") + kRowColumns + " FROM " + table +
                                             " WHERE wrapped_key IS NOT NULL AND wrapping_key_id <> $1 "
                                             "AND wrapping_key_id = ANY($3::text[]) AND key_id > $4 "
                                             "ORDER BY key_id LIMIT $2 FOR UPDATE",
                                         keyring_->active_id(), std::to_string(limit - done), held, after);
    if (rows.empty()) break;
    for (const auto& r : rows) {
      auto row = row_from<Row>(r);
      after = row.key_id;
      auto key = try_unwrap(row);
      if (!key) {
        result.unverifiable.push_back({row.subject, row.key_id, row.wrapping_key_id.value_or(""),
                                       row.created_by.value_or("")});
        continue;
      }
      outbox::pgx::exec_params(tx,
                               "UPDATE " + table +
                                   " SET wrapping_key_id = $2, wrapped_key = $3::bytea "
                                   "WHERE key_id = $1",
                               row.key_id, keyring_->active_id(),
                               outbox::pgx::bytea(wrap(row.subject, row.key_id, *key)));
      ++done;
    }
  }
  return done;
}

SubjectKeyStore::RewrapResult SubjectKeyStore::rewrap(pqxx::transaction_base& tx, std::size_t limit) const {
  RewrapResult result;
  result.rewrapped = rewrap_table(tx, table_, limit, result);
  if (result.rewrapped < limit) result.rewrapped += rewrap_table(tx, superseded_, limit - result.rewrapped, result);
  const auto held = pg::text_array(keyring_->key_ids());
  for (const auto& r : outbox::pgx::exec_params(
           tx,
           "SELECT wrapping_key_id, count(*) FROM (SELECT wrapping_key_id FROM " + table_ +
               " WHERE wrapped_key IS NOT NULL UNION ALL SELECT wrapping_key_id FROM " + superseded_ +
               " WHERE wrapped_key IS NOT NULL) k WHERE wrapping_key_id <> ALL($1::text[]) GROUP BY wrapping_key_id",
           held))
    result.skipped_by_master_key.emplace(r[0].as<std::string>(), r[1].as<std::size_t>());
  return result;
}

std::vector<SubjectKeyStore::KeyCheck> SubjectKeyStore::check_keyring(pqxx::transaction_base& tx,
                                                                      std::size_t per_login) const {
  std::map<std::string, KeyCheck> by_id;
  const auto sample = std::string("SELECT ") + kRowColumns + " FROM (SELECT k.*, row_number() OVER " +
                      "(PARTITION BY wrapping_key_id, created_by ORDER BY random()) AS n FROM (SELECT " + kColumns +
                      ", created_by FROM " + table_ + " UNION ALL SELECT " + kColumns + ", created_by FROM " +
                      superseded_ +
                      ") k WHERE wrapped_key IS NOT NULL AND wrapping_key_id = ANY($1::text[])) s WHERE n <= $2";
  for (const auto& r :
       outbox::pgx::exec_params(tx, sample, pg::text_array(keyring_->key_ids()), std::to_string(per_login))) {
    const auto row = row_from<Row>(r);
    auto& check = by_id[*row.wrapping_key_id];
    check.master_key_id = *row.wrapping_key_id;
    ++check.sampled;
    if (try_unwrap(row)) ++check.verified;
  }
  std::vector<KeyCheck> out;
  for (auto& [id, check] : by_id) out.push_back(std::move(check));
  return out;
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

std::string SubjectKeyStore::RewrapResult::unverifiable_text() const {
  if (unverifiable.empty()) return "";
  constexpr std::size_t kNamed = 20;
  std::string text = std::to_string(unverifiable.size()) +
                     (unverifiable.size() == 1 ? " subject key does not verify under the master key that wraps it"
                                               : " subject keys do not verify under the master keys that wrap them") +
                     " and " + (unverifiable.size() == 1 ? "was" : "were") + " not rewrapped:";
  for (std::size_t i = 0; i < unverifiable.size() && i < kNamed; ++i) {
    const auto& u = unverifiable[i];
    text += std::string(i ? ";" : "") + " subject " + quoted_value(u.subject) + " (key " + quoted_value(u.key_id) +
            ", master key " + quoted_value(u.wrapping_key_id) + ", created by " +
            (u.created_by.empty() ? std::string("an unknown login") : "login " + quoted_value(u.created_by)) + ")";
  }
  if (unverifiable.size() > kNamed) text += "; and " + std::to_string(unverifiable.size() - kNamed) + " more";
  return text;
}

}  // namespace outbox
