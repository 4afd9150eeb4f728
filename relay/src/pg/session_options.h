#pragma once
// dsn_with_session_options: the connection string every relay session is opened with.

#include <string>

#include "config/config.h"

namespace relay {

// The keyword connection string the relay hands to libpq: postgres.dsn (keyword or
// URI form) as libpq parses it, every value quoted, plus the relay's session options
// (keepalives, timeouts, application_name) where the DSN does not set them, and
// sslmode=verify-full when postgres.require_tls is on. Pure; throws
// std::invalid_argument (naming no value) when the DSN does not parse.
std::string dsn_with_session_options(const PostgresConfig& config);

}  // namespace relay
