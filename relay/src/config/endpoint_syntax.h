#pragma once
// Syntax checks of the AMQP URI (postgres.dsn: outbox/pg_dsn_check.h) and of
// http.listen, so that a malformed one is a configuration error (exit 2) rather than a relay that retries
// forever or an endpoint that never binds.

#include <optional>
#include <string>

namespace relay {

// Why `uri` is not an amqp:// or amqps:// URI rabbitmq-c can parse, or nullopt.
// Never quotes the URI (it holds the password). rabbitmq-c percent-decodes the user
// and password; a host that is not a host name or address is refused.
std::optional<std::string> amqp_uri_syntax_error(const std::string& uri);

// The host a listen value without one binds: loopback, so the endpoint is reachable
// from the pod network only when the configuration says so (0.0.0.0:9187).
inline constexpr const char* kDefaultHttpHost = "127.0.0.1";

// An http.listen value, checked: an IP address literal (IPv6 without brackets) and a port.
struct ListenAddress {
  std::string host;
  unsigned short port = 0;
};

// Parses "host:port" (IPv4 literal, "[IPv6]", or "localhost"), or a port alone
// ("9187" or ":9187", bound on kDefaultHttpHost). Throws std::invalid_argument with
// a one-line reason (used by config checks and by HttpServer). Pure.
ListenAddress parse_listen_address(const std::string& listen);

}  // namespace relay
