#pragma once
// Start-up checks of the relay's PostgreSQL session: privileges and encryption.

#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "outbox/pqxx_compat.h"

namespace relay {

// A check that failed; the message names what is missing and how to fix it.
class PreflightError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the relay's role lacks, one entry per privilege, e.g.
// `UPDATE on "outbox".outbox of column(s) parked_at (claims rows FOR UPDATE ...)`.
// UPDATE is checked per column: the relay needs it on its state columns only.
// DELETE is needed only when `retention` is on or rows are deleted at ack
// (relay.on_publish: delete). Throws PreflightError when the outbox table does not exist.
std::vector<std::string> missing_privileges(outbox::PgConnection& conn, const std::string& schema, bool retention,
                                            bool delete_on_publish = false);

// Throws PreflightError naming the role and each missing privilege.
void preflight(outbox::PgConnection& conn, const RelayConfig& config);

// Throws PreflightError when postgres.require_tls is set and the session is not
// encrypted (libpq's sslmode does not apply over a Unix socket). connect_postgres
// checks it for every session it opens, before any other statement.
void require_tls_session(outbox::PgConnection& conn, const PostgresConfig& postgres);
// What it says, as open_relay_session says it for a libpq session.
inline constexpr const char* kNotEncryptedSession =
    "postgres.require_tls is true but the PostgreSQL session is not encrypted";

}  // namespace relay
