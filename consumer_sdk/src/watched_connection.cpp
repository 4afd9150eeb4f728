#include "watched_connection.h"

#include <libpq-events.h>
#include <libpq-fe.h>

#include <pqxx/except>

#include "outbox/pg_connection.h"

namespace outbox::detail {
namespace {

// libpq calls this for every event of the connection; a result created from a FATAL
// ErrorResponse is the server's last word before it closes the session.
int remember_fatal(PGEventId event, void* info, void* fatal_sqlstate) {
  if (event != PGEVT_RESULTCREATE) return 1;  // 0 would fail the registration or the result
  const PGresult* result = static_cast<PGEventResultCreate*>(info)->result;
  const char* severity = PQresultErrorField(result, PG_DIAG_SEVERITY_NONLOCALIZED);
  const char* sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  if (severity && sqlstate && std::string_view(severity) == "FATAL")
    *static_cast<std::string*>(fatal_sqlstate) = sqlstate;
  return 1;
}

constexpr const char* kEventProcName = "outbox-consumer-fatal-watch";

#if PQXX_VERSION_MAJOR >= 7
// Opens the libpq connection, registers the procedure, and hands the connection to
// libpqxx (which owns and closes it from then on).
pqxx::connection open_watched(const std::string& conninfo, std::string& fatal_sqlstate) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (!conn) throw pqxx::broken_connection("out of memory opening a PostgreSQL connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    throw pqxx::broken_connection(message);
  }
  // Fails only when out of memory; then a slow handler's lost session counts as the
  // environment's, as before.
  PQregisterEventProc(conn, remember_fatal, kEventProcName, &fatal_sqlstate);
  return pqxx::connection::seize_raw_connection(conn);
}
#endif

}  // namespace

#if PQXX_VERSION_MAJOR >= 7
WatchedConnection::WatchedConnection(const std::string& conninfo)
    : pqxx::connection(open_watched(conninfo, *fatal_sqlstate)) {}
#else
pqxx::connectionpolicy::handle WatchedConnection::Policy::do_startconnect(handle orig) {
  handle conn = connect_direct::do_startconnect(orig);
  // Fails only when already registered (a reactivated handle) or out of memory; then
  // a slow handler's lost session counts as the environment's, as before.
  PQregisterEventProc(conn, remember_fatal, kEventProcName, &fatal_sqlstate_);
  return conn;
}

WatchedConnection::WatchedConnection(const std::string& conninfo)
    : connection_base(policy_), policy_(conninfo, fatal_sqlstate_) {
  init();
}

WatchedConnection::~WatchedConnection() noexcept { close(); }
#endif

std::unique_ptr<WatchedConnection> open_watched_connection(const std::string& dsn) {
  return open_pg_connection_as<WatchedConnection>(dsn);
}

std::string slow_transaction_reason(std::string_view sqlstate) {
  if (sqlstate == "25P03")
    return "PostgreSQL ended the session (SQLSTATE 25P03): the handler left its transaction idle longer than "
           "idle_in_transaction_session_timeout; the transaction was rolled back";
  if (sqlstate == "25P04")
    return "PostgreSQL ended the session (SQLSTATE 25P04): the handler's transaction ran longer than "
           "transaction_timeout; the transaction was rolled back";
  return {};
}

}  // namespace outbox::detail
