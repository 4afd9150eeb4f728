#include "keys_commands.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <sstream>
#include <vector>

#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/keyring.h"
#include "outbox/one_line.h"
#include "outbox/pg_connection.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"
#include "outbox/subject_key_store.h"

namespace outbox::keys_tool {
namespace {

// Errors name the option (--keyring or --keyring-env) and the file or variable.
std::shared_ptr<const Keyring> load_keyring(const KeysOptions& o) {
  try {
    if (!o.keyring_file.empty()) return std::make_shared<const Keyring>(Keyring::load_file(o.keyring_file));
    return std::make_shared<const Keyring>(Keyring::from_env(o.keyring_env));
  } catch (const KeyringError& e) {
    throw std::runtime_error((o.keyring_file.empty() ? "--keyring-env: " : "--keyring: ") + std::string(e.what()));
  }
}

bool has_keyring(const KeysOptions& o) { return !o.keyring_file.empty() || !o.keyring_env.empty(); }

// The connection string from the environment variable --dsn-env names; its value
// never appears in an error (open_pg_connection scrubs the password out of libpq's).
std::unique_ptr<pqxx::connection> connect(const KeysOptions& o) {
  const char* dsn = std::getenv(o.dsn_env.c_str());
  if (!dsn || !*dsn)
    throw std::invalid_argument("--dsn-env: the environment variable " + quoted_value(o.dsn_env) +
                                " is not set (it holds the PostgreSQL connection string)");
  return open_pg_connection(dsn);
}

// Subject keys with a wrapped key (current and superseded), by the master key that
// wraps them.
std::map<std::string, long long> keys_by_master(pqxx::connection& conn, const std::string& schema) {
  pqxx::read_transaction tx(conn);
  std::map<std::string, long long> out;
  for (const auto& r : tx.exec("SELECT wrapping_key_id, count(*) FROM (SELECT wrapping_key_id FROM " + schema +
                               ".outbox_subject_keys WHERE wrapped_key IS NOT NULL UNION ALL SELECT wrapping_key_id "
                               "FROM " +
                               schema +
                               ".outbox_subject_keys_superseded WHERE wrapped_key IS NOT NULL) k "
                               "GROUP BY 1 ORDER BY 1"))
    out[r[0].as<std::string>()] = r[1].as<long long>();
  return out;
}

// Key material, not only key ids: unwraps a sample of the stored keys under each
// master key id of `ring` and prints a line per id. Returns the ids whose key in
// `ring` unwraps none of them (another key under a reused id), each said on `err`.
std::vector<std::string> verify_key_material(pqxx::connection& conn, const KeysOptions& o,
                                             const std::shared_ptr<const Keyring>& ring, std::ostream& out,
                                             std::ostream& err) {
  const SubjectKeyStore store(o.schema, ring);
  pqxx::read_transaction tx(conn);
  const auto checks = store.check_keyring(tx);
  out << "key material (a random sample of up to " << SubjectKeyStore::kSamplePerLogin
      << " stored keys per master key id and creating login):\n";
  std::vector<std::string> wrong;
  for (const auto& c : checks) {
    out << "  " << quoted_value(c.master_key_id) << ": " << c.verified << " of " << c.sampled << " sampled keys unwrap";
    if (c.mismatch()) {
      out << ": this keyring's key is NOT the one that wrapped them\n";
      err << "outbox-keys: the keyring's key " << quoted_value(c.master_key_id) << " unwraps none of the " << c.sampled
          << " sampled subject keys stored under that id: it holds other key bytes than the key that wrapped them "
             "(an id reused for a new key?); put the original key back under "
          << quoted_value(c.master_key_id) << " and give a new key a new id; rotate nothing until then\n";
      wrong.push_back(c.master_key_id);
    } else if (c.verified < c.sampled) {
      out << " (the others do not verify: bad rows, which `rewrap` names and skips)\n";
    } else {
      out << "\n";
    }
  }
  if (checks.empty()) out << "  (no stored key is wrapped by a key of this keyring)\n";
  return wrong;
}

// Runs `body`, turning every error into one line on `err` (key ids and option
// names only: the SDK's errors never carry key bytes or passwords) and kFailed.
template <class Body>
int guarded(std::ostream& err, Body body) {
  try {
    return body();
  } catch (const pqxx::undefined_table&) {
    err << "outbox-keys: the schema has no outbox_subject_keys table: migrate it (outbox-relay migrate)\n";
  } catch (const std::exception& e) {
    err << "outbox-keys: " << one_line(e.what()) << "\n";
  }
  return kFailed;
}

}  // namespace

int check(const KeysOptions& o, std::ostream& out, std::ostream& err) {
  return guarded(err, [&] {
    const auto ring = load_keyring(o);
    out << "keyring " << (o.keyring_file.empty() ? "$" + o.keyring_env : o.keyring_file) << ": ok\n";
    out << "  active key: " << quoted_value(ring->active_id()) << "\n  keys:";
    for (const auto& id : ring->key_ids()) out << " " << quoted_value(id);
    out << "\n  blind-index key: " << (ring->has_index_keys() ? quoted_value(ring->index_active_id()) : "none") << "\n";
    if (o.schema.empty()) return kOk;  // no database named: the ids only
    quoted_identifier(o.schema, "--schema");
    auto conn = connect(o);
    return verify_key_material(*conn, o, ring, out, err).empty() ? kOk : kFailed;
  });
}

int status(const KeysOptions& o, std::ostream& out, std::ostream& err) {
  return guarded(err, [&] {
    const auto schema = quoted_identifier(o.schema, "--schema");
    const auto table = schema + ".outbox_subject_keys";
    std::shared_ptr<const Keyring> ring;
    if (has_keyring(o)) ring = load_keyring(o);
    auto conn = connect(o);
    const auto by_master = keys_by_master(*conn, schema);  // everything read before anything is printed
    const auto erased = outbox::pgx::exec1(pqxx::read_transaction(*conn),
                                           "SELECT count(*) FROM " + table + " WHERE erased_at IS NOT NULL")[0]
                            .as<long long>();
    long long to_rewrap = 0, missing = 0;
    out << "subject keys by master key:\n";
    for (const auto& [id, n] : by_master) {
      std::string note;
      if (ring && id == ring->active_id()) {
        note = "active";
      } else if (ring && ring->find(id)) {
        note = "in the keyring, not active: rewrap them";
        to_rewrap += n;
      } else if (ring) {
        note = "NOT in the keyring: they cannot be rewrapped or decrypted";
        missing += n;
      }
      out << "  " << quoted_value(id) << ": " << n << (note.empty() ? "" : " (" + note + ")") << "\n";
    }
    out << "erased subjects: " << erased << "\n";
    if (!ring) return kOk;
    // Before "every key is wrapped by the active key": that is about ids, and an id
    // may hold other bytes than the key that wrapped them.
    const auto wrong = verify_key_material(*conn, o, ring, out, err);
    if (!wrong.empty()) return kFailed;
    out << (to_rewrap + missing == 0 ? "every subject key is wrapped by the active key\n"
                                     : std::to_string(to_rewrap) + " to rewrap, " + std::to_string(missing) +
                                           " wrapped by keys missing from the keyring\n");
    return kOk;
  });
}

int rewrap(const KeysOptions& o, const std::atomic<bool>& stop, std::ostream& out, std::ostream& err) {
  return guarded(err, [&] {
    const auto ring = load_keyring(o);
    const SubjectKeyStore store(o.schema, ring);
    auto conn = connect(o);
    // A keyring whose key for an id is not the one that wrapped the keys under it
    // would rewrap nothing of them and could let the operator retire the real key.
    std::ostringstream sample;
    if (!verify_key_material(*conn, o, ring, sample, err).empty()) {
      err << "outbox-keys: rewrap refused: nothing was changed\n";
      return kFailed;
    }
    std::size_t total = 0;
    SubjectKeyStore::RewrapResult last;
    for (;;) {
      if (stop) {
        err << "outbox-keys: interrupted after rewrapping " << total
            << " subject keys (each batch committed); run it again to go on\n";
        return kFailed;
      }
      pqxx::work tx(*conn);
      last = store.rewrap(tx, o.batch);
      tx.commit();
      if (last.rewrapped == 0) break;
      total += last.rewrapped;
      err << "rewrapped " << last.rewrapped << " subject keys (" << total << " so far)\n";
    }
    out << "rewrapped " << total << " subject keys under the active key " << quoted_value(ring->active_id()) << "\n";
    if (last.skipped() == 0 && last.unverifiable.empty()) return kOk;
    if (last.skipped() != 0) err << "outbox-keys: " << last.skipped_text() << "\n";
    if (!last.unverifiable.empty())
      err << "outbox-keys: " << one_line(last.unverifiable_text(), 8192)
          << "; find out who wrote them (created by), then erase or delete those rows\n";
    return kIncomplete;
  });
}

int erase(const KeysOptions& o, std::ostream& out, std::ostream& err) {
  return guarded(err, [&] {
    auto conn = connect(o);
    pqxx::work tx(*conn);
    const bool destroyed = SubjectKeyStore::erase(tx, o.schema, o.subject);
    tx.commit();
    out << "subject " << quoted_value(o.subject)
        << (destroyed ? ": data key destroyed; its encrypted fields can no longer be decrypted"
                      : ": had no data key, or was erased before; none will be made for it")
        << "\nrun VACUUM on the outbox_subject_keys table so no old copy of the key stays in its pages\n";
    return kOk;
  });
}

}  // namespace outbox::keys_tool
