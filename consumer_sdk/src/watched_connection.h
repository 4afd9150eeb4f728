#pragma once
// WatchedConnection: a worker's PostgreSQL connection that remembers why the server
// closed it.

#include <memory>
#include <pqxx/connection>
#include <pqxx/version>
#include <string>
#include <string_view>

namespace outbox::detail {

// When the server ends a session, libpqxx throws a bare broken_connection ("not
// connected") and drops the FATAL error the server sent just before closing. That
// error is the only thing telling a handler that held its transaction too long
// (idle_in_transaction_session_timeout, SQLSTATE 25P03) from a database outage, so
// this connection keeps its SQLSTATE, caught with a libpq event procedure on every
// result the connection creates. The procedure is registered on the libpq
// connection through public API only: libpqxx 6.4's connection policies, or libpqxx
// 7.10's seize_raw_connection() of a connection opened here. Thread safety: one
// thread at a time, like pqxx.
#if PQXX_VERSION_MAJOR >= 7
namespace watched {
// Holds the SQLSTATE where the event procedure writes it, before the connection
// base is constructed (base classes are constructed in declaration order).
struct FatalSlot {
  std::unique_ptr<std::string> fatal_sqlstate = std::make_unique<std::string>();
};
}  // namespace watched

class WatchedConnection : private watched::FatalSlot, public pqxx::connection {
 public:
  // Connects with the libpq keyword string `conninfo`; throws pqxx::broken_connection
  // as pqxx::connection does.
  explicit WatchedConnection(const std::string& conninfo);

  // SQLSTATE of the FATAL error the server last sent on this connection; empty if none.
  const std::string& server_fatal_sqlstate() const noexcept { return *fatal_sqlstate; }
};
#else
class WatchedConnection : public pqxx::connection_base {
 public:
  // Connects with the libpq keyword string `conninfo`; throws as pqxx::connection does.
  explicit WatchedConnection(const std::string& conninfo);
  ~WatchedConnection() noexcept;

  // SQLSTATE of the FATAL error the server last sent on this connection; empty if none.
  const std::string& server_fatal_sqlstate() const noexcept { return fatal_sqlstate_; }

 private:
  class Policy : public pqxx::connect_direct {
   public:
    Policy(const std::string& conninfo, std::string& fatal_sqlstate)
        : connect_direct(conninfo), fatal_sqlstate_(fatal_sqlstate) {}
    handle do_startconnect(handle orig) override;

   private:
    std::string& fatal_sqlstate_;
  };

  std::string fatal_sqlstate_;  // before policy_: the policy writes to it
  Policy policy_;
};
#endif

// open_pg_connection (outbox/pg_connection.h) for a WatchedConnection: the same
// parsing of `dsn`, and the same scrubbing of its password from connection errors.
std::unique_ptr<WatchedConnection> open_watched_connection(const std::string& dsn);

// When the server ended the session with `sqlstate` because its transaction took
// too long (25P03 idle_in_transaction_session_timeout; 25P04 transaction_timeout,
// PostgreSQL 17): the reason in words, naming the setting. Empty for any other
// SQLSTATE (a shutdown, a terminated backend, a crash: the environment's fault).
std::string slow_transaction_reason(std::string_view sqlstate);

}  // namespace outbox::detail
