#pragma once
// PgError: a failure of the relay's own PostgreSQL session, typed by what a retry means.

#include <stdexcept>
#include <string>

namespace relay {

// What PgSession, PgResult, BatchTransaction and OutboxStore throw (the admin
// commands' and the listener's libpqxx sessions throw libpqxx's own types). The loop
// decides from kind() and sqlstate(), never from what(); what() is one line, no
// password, no payload.
//
// Whether a retry is safe, as libpqxx classifies it:
// - kSessionLost: the session is gone (or never opened). A transaction on it has
//   rolled back with it (its row locks are free); nothing it sent committed. Retry on
//   a new session.
// - kStatement: the server refused a statement (sqlstate() says why). The
//   transaction, if any, is aborted and must be rolled back; the session may still
//   be open (session_open()).
// - kInDoubt: COMMIT was sent and its answer never came: it may or may not have
//   committed. For the relay: the rows it marked may be published again (consumers
//   deduplicate by message id); never retried as if nothing happened.
// - kUsage: the relay misused the session or a result (a statement on an ended
//   transaction, a column that is not there, a value not in the binary form
//   expected): a bug or a schema the relay does not know. Not retried as is.
//
// Thread safety: an immutable value.
class PgError : public std::runtime_error {
 public:
  enum class Kind { kSessionLost, kStatement, kInDoubt, kUsage };

  PgError(Kind kind, const std::string& what, std::string sqlstate = {}, bool session_open = false);

  Kind kind() const { return kind_; }
  // The server's SQLSTATE for kStatement ("40P01"); empty otherwise.
  const std::string& sqlstate() const { return sqlstate_; }
  // Whether the session was still open when it was thrown (kStatement, kUsage).
  bool session_open() const { return session_open_; }
  // The session is a standby's (25006 read_only_sql_transaction): a new session,
  // with target_session_attrs=read-write, lets libpq find the primary.
  bool on_standby() const { return kind_ == Kind::kStatement && sqlstate_ == "25006"; }

  // The kind's name, for logs: "session lost", "statement refused", "in doubt", "usage".
  static const char* name(Kind kind);

 private:
  Kind kind_;
  std::string sqlstate_;
  bool session_open_;
};

}  // namespace relay
