#pragma once
// Syntax checks of the two connection strings, so that a malformed one is a
// configuration error (exit 2) rather than a relay that retries forever.

#include <optional>
#include <string>

namespace relay {

// Why `dsn` is not a libpq connection string or URI that libpq can use, or nullopt.
// The text never quotes a value that may be secret: only option names (a key) and,
// in keyword form, the port (scrubbed of the password) are shown. Checks what libpq
// parses (PQconninfoParse), that every port is a number from 1 to 65535, and that
// no host (or, in a URI, the database name) holds what a password with a raw @, :
// or / leaves there when the URI is split.
std::optional<std::string> dsn_syntax_error(const std::string& dsn);

// Why `uri` is not an amqp:// or amqps:// URI rabbitmq-c can parse, or nullopt.
// Never quotes the URI (it holds the password). rabbitmq-c percent-decodes the user
// and password; a host that is not a host name or address is refused.
std::optional<std::string> amqp_uri_syntax_error(const std::string& uri);

}  // namespace relay
