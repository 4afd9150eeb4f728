#include "outbox/payload_decryptor.h"

#include <algorithm>
#include <pqxx/pqxx>

#include "outbox/crypto_errors.h"
#include "outbox/environment_error.h"
#include "outbox/pg_conninfo.h"
#include "session_limits.h"

namespace outbox {

struct PayloadDecryptor::KeyConnection {
  explicit KeyConnection(const std::string& dsn) : conn(dsn) {}
  pqxx::connection conn;
};

namespace {

// subject_keys_dsn with the lookup's limits where the user set none: a key database
// that hangs must not hold the shared connection's mutex, and with it every worker
// that needs a key, for good. A statement_timeout too: the server ends a lookup
// stuck behind a lock.
std::string key_session_dsn(const PayloadDecryptorOptions& o) {
  auto info = PgConnInfo::parse(o.subject_keys_dsn);
  const auto timeout_ms = std::max<long long>(1, o.subject_keys_timeout.count());
  detail::set_session_limits(info, "outbox-consumer subject keys", o.subject_keys_timeout);
  info.set_default("tcp_user_timeout", std::to_string(std::max<long long>(timeout_ms, 5000)));
  info.set_default("options", "-c statement_timeout=" + std::to_string(timeout_ms));
  return info.to_string();
}

}  // namespace

PayloadDecryptor::PayloadDecryptor(PayloadDecryptorOptions options) : options_(std::move(options)) {
  if (!options_.keyring) throw ValidationError("keyring", "a payload decryptor needs a keyring");
  FieldDecryptor::SubjectKeyFetcher fetch = nullptr;
  if (!options_.subject_keys_dsn.empty()) {
    key_dsn_ = key_session_dsn(options_);  // throws std::invalid_argument for a DSN libpq cannot parse
    store_ = std::make_unique<SubjectKeyStore>(options_.subject_keys_schema, options_.keyring);
    fetch = [this](const std::string& key_id) { return fetch_subject_key(key_id); };
  }
  decryptor_ = std::make_unique<FieldDecryptor>(options_.keyring, options_.event_schemas, std::move(fetch));
}

PayloadDecryptor::~PayloadDecryptor() = default;

std::string PayloadDecryptor::decrypt(const std::string& type, std::string_view body,
                                      const MessageId& message_id) const {
  return decryptor_->decrypt(type, body, message_id);
}

std::string PayloadDecryptor::decrypt(const Delivery& delivery) const {
  return decrypt(delivery.type, delivery.body, delivery.message_id);
}

SubjectKeyStore::DataKey PayloadDecryptor::fetch_subject_key(const std::string& key_id) const {
  std::lock_guard lock(mu_);
  try {
    if (!conn_) conn_ = std::make_unique<KeyConnection>(key_dsn_);
    pqxx::read_transaction tx(conn_->conn);
    return store_->fetch(tx, key_id);
  } catch (const pqxx::sql_error& e) {
    // The key id was checked and is a bound parameter: an SQL error here is the key
    // database's (permissions, a missing table, a timeout), never the message's.
    conn_.reset();
    throw EnvironmentError("subject key lookup failed in PostgreSQL (SQLSTATE " + e.sqlstate() +
                           "); the message will be retried");
  } catch (const pqxx::failure&) {
    conn_.reset();  // reconnect on the next message
    // libpq's connection messages can echo connection parameters: not repeated here.
    throw EnvironmentError("subject key store unreachable (PostgreSQL); the message will be retried");
  }
}

}  // namespace outbox
