#include "outbox/pg_dsn_check.h"

#include <set>
#include <sstream>

#include "outbox/pg_conninfo.h"
#include "outbox/secret_scrubber.h"

namespace outbox {
namespace {

// What a URI holding a password with raw @, :, / or % turns into when split.
constexpr const char* kEncodeHint =
    "the value is not shown; in a URI, percent-encode @, :, /, ?, # and % in the user and "
    "password (%40, %3A, %2F, %3F, %23, %25)";

bool valid_port_list(const std::string& ports) {
  std::stringstream in(ports);
  for (std::string port; std::getline(in, port, ',');) {
    if (port.empty()) continue;  // libpq: an empty entry means the default port
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
    int n = std::stoi(port);
    if (n < 1 || n > 65535) return false;
  }
  return true;
}

bool plausible_host_list(const std::string& hosts) {
  std::stringstream in(hosts);
  for (std::string host; std::getline(in, host, ',');)
    if (!plausible_host(host)) return false;
  return true;
}

// libpq ends a URI's user and password at the first '@' (or at a '/' before it): a
// password holding a raw '@', '/', '?' or '#' leaves its tail in the host, database
// or query, where a message or a DNS lookup would show it (user:Zq@secrethost?...@db
// looks up "secrethost"). So a URI may hold one raw '@', and no '/', '?' or '#' before it.
bool ambiguous_userinfo(const std::string& dsn) {
  if (dsn.rfind("postgresql://", 0) != 0 && dsn.rfind("postgres://", 0) != 0) return false;
  const auto rest = dsn.substr(dsn.find("://") + 3);
  const auto at = rest.find('@');
  if (at == std::string::npos) return false;
  return rest.find('@', at + 1) != std::string::npos || rest.find_first_of("/?#") < at;
}

}  // namespace

bool plausible_host(const std::string& host) {
  if (host.empty() || host[0] == '/') return true;
  return host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:%") ==
         std::string::npos;
}

std::optional<std::string> pg_dsn_syntax_error(const std::string& dsn) {
  if (ambiguous_userinfo(dsn))
    return std::string("a URI with more than one '@', or an '@' after '/', '?' or '#' (") + kEncodeHint +
           "; in a query value, @ as %40)";
  PgConnInfo info;
  try {
    info = PgConnInfo::parse(dsn);
  } catch (const std::invalid_argument& e) {
    return std::string("not a valid libpq connection string or URI: ") + e.what();
  }
  const SecretScrubber scrub({info.get("password").value_or("")});
  for (const char* key : {"host", "hostaddr"}) {
    if (auto hosts = info.get(key); hosts && !plausible_host_list(*hosts))
      return std::string(key) + " is not a host name, IP address or socket directory (" + kEncodeHint + ")";
  }
  if (auto port = info.get("port"); port && !valid_port_list(*port)) {
    if (info.was_uri()) return std::string("a port is not a number from 1 to 65535 (") + kEncodeHint + ")";
    return "port '" + scrub.scrub(port->substr(0, 32)) + "' is not a number from 1 to 65535";
  }
  // libpq checks sslmode only when connecting, where `run` would retry it forever.
  static const std::set<std::string> kSslModes = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"};
  if (auto mode = info.get("sslmode"); mode && !kSslModes.count(*mode))
    return "sslmode '" + scrub.scrub(mode->substr(0, 32)) +
           "' is not one of disable, allow, prefer, require, verify-ca, verify-full";
  // postgresql://user:pa/ss@host/db splits at the '/': the rest lands in the database name.
  if (auto db = info.get("dbname"); info.was_uri() && db && db->find('@') != std::string::npos)
    return std::string("the database name holds '@' (") + kEncodeHint + ")";
  return std::nullopt;
}

}  // namespace outbox
