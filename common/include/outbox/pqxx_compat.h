#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// What differs between libpqxx 6.4 (Debian 12) and 7.x (Debian 13), in one place,
// so the rest of the code names one thing whichever it is built against.

#include <pqxx/connection>
#include <pqxx/result>
#include <pqxx/row>
#include <pqxx/transaction_base>
#include <pqxx/version>
#if PQXX_VERSION_MAJOR >= 7
#include <pqxx/params>
#include <pqxx/prepared_statement>
#else
#include <pqxx/binarystring>
#include <pqxx/subtransaction>
#endif
#include <string>
#include <string_view>
#include <utility>

namespace outbox {

// The type of a transaction's conn(): libpqxx 6.4 hands out the base class of its
// connections, libpqxx 7 has one connection class (and connection_base is an alias
// of it, which a forward declaration would contradict).
#if PQXX_VERSION_MAJOR >= 7
using PgConnection = pqxx::connection;
#else
using PgConnection = pqxx::connection_base;
#endif

// Closes the connection now (libpqxx 6.4: disconnect(); 7: close()).
inline void close_pg_connection(PgConnection& conn) {
#if PQXX_VERSION_MAJOR >= 7
  conn.close();
#else
  conn.disconnect();
#endif
}

}  // namespace outbox

// Statements with parameters, as one call on both: libpqxx 7.10 deprecates the
// exec_params/exec_prepared families (and exec0/exec1) in favour of exec() with
// pqxx::params and result checks that 6.4 does not have. `tx` is any transaction
// (a temporary too). The *1 forms return the one row and throw pqxx::unexpected_rows
// otherwise; the *0 forms expect no rows.

namespace outbox::pgx {

#if PQXX_VERSION_MAJOR < 7
// libpqxx 6.4 sends a subtransaction's SAVEPOINT lazily, from its exec() family only:
// a statement sent first through exec_params or exec_prepared ran before the
// SAVEPOINT, outside it, and survived the subtransaction's abort (an event enqueued in
// an aborted subtransaction was published: outbox_writer_pgtest). One exec() first
// makes sure the savepoint is open: a round trip per statement, on libpqxx 6.4 and in
// subtransactions only (7.x opens it when the subtransaction is made).
inline void open_savepoint(pqxx::transaction_base& tx) {
  if (auto* sub = dynamic_cast<pqxx::subtransaction*>(&tx)) sub->exec("SELECT 1");
}
#endif

template <class Tx, class... Args>
pqxx::result exec_params(Tx&& tx, const std::string& sql, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  return tx.exec(sql, pqxx::params{std::forward<Args>(args)...});
#else
  open_savepoint(tx);
  return tx.exec_params(sql, std::forward<Args>(args)...);
#endif
}

template <class Tx, class... Args>
pqxx::row exec_params1(Tx&& tx, const std::string& sql, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  return tx.exec(sql, pqxx::params{std::forward<Args>(args)...}).one_row();
#else
  open_savepoint(tx);
  return tx.exec_params1(sql, std::forward<Args>(args)...);
#endif
}

template <class Tx, class... Args>
void exec_params0(Tx&& tx, const std::string& sql, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  tx.exec(sql, pqxx::params{std::forward<Args>(args)...}).no_rows();
#else
  open_savepoint(tx);
  tx.exec_params0(sql, std::forward<Args>(args)...);
#endif
}

template <class Tx, class... Args>
pqxx::result exec_prepared(Tx&& tx, const std::string& name, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  return tx.exec(pqxx::prepped{name}, pqxx::params{std::forward<Args>(args)...});
#else
  open_savepoint(tx);
  return tx.exec_prepared(name, std::forward<Args>(args)...);
#endif
}

template <class Tx, class... Args>
pqxx::row exec_prepared1(Tx&& tx, const std::string& name, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  return tx.exec(pqxx::prepped{name}, pqxx::params{std::forward<Args>(args)...}).one_row();
#else
  open_savepoint(tx);
  return tx.exec_prepared1(name, std::forward<Args>(args)...);
#endif
}

template <class Tx, class... Args>
void exec_prepared0(Tx&& tx, const std::string& name, Args&&... args) {
#if PQXX_VERSION_MAJOR >= 7
  tx.exec(pqxx::prepped{name}, pqxx::params{std::forward<Args>(args)...}).no_rows();
#else
  open_savepoint(tx);
  tx.exec_prepared0(name, std::forward<Args>(args)...);
#endif
}

template <class Tx>
pqxx::row exec1(Tx&& tx, const std::string& sql) {
#if PQXX_VERSION_MAJOR >= 7
  return tx.exec(sql).one_row();
#else
  return tx.exec1(sql);
#endif
}

template <class Tx>
void exec0(Tx&& tx, const std::string& sql) {
#if PQXX_VERSION_MAJOR >= 7
  tx.exec(sql).no_rows();
#else
  tx.exec0(sql);
#endif
}

// A bytea parameter holding `bytes` as they are (no text escaping).
inline auto bytea(std::string_view bytes) {
#if PQXX_VERSION_MAJOR >= 7
  return pqxx::bytes_view(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
#else
  return pqxx::binarystring(bytes.data(), bytes.size());
#endif
}

// A bytea field's bytes (NULL reads as empty).
inline std::string bytea_of(const pqxx::field& f) {
  if (f.is_null()) return {};
#if PQXX_VERSION_MAJOR >= 7
  const auto b = f.as<pqxx::bytes>();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
#else
  return pqxx::binarystring(f).str();
#endif
}

}  // namespace outbox::pgx
