#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// pg_dsn_syntax_error: whether a PostgreSQL connection string is one libpq can use,
// checked before connecting, so a malformed one is a configuration error (the
// relay's postgres.dsn, the consumer SDK's pg_dsn) rather than a retry forever.

#include <optional>
#include <string>

namespace outbox {

// Why `dsn` is not a libpq connection string or URI that libpq can use, or nullopt.
// The text never quotes a value that may be secret: only option names (a key) and,
// in keyword form, the port (scrubbed of the password) are shown. Checks what libpq
// parses (PQconninfoParse), that every port is a number from 1 to 65535, and that
// no host (or, in a URI, the database name) holds what a password with a raw @, :
// or / leaves there when the URI is split, and that a URI holds at most one raw @,
// with no /, ? or # before it (the rest of a password would land in the host or
// query). Pure; thread-safe.
std::optional<std::string> pg_dsn_syntax_error(const std::string& dsn);

// A host name, an IPv4 or IPv6 address (with a zone), or a socket directory. A
// password split in the wrong place shows up as a host holding '@' or '/'. Pure.
bool plausible_host(const std::string& host);

}  // namespace outbox
