#include "endpoint_syntax.h"

#include <amqp.h>
#include <libpq-fe.h>

#include <memory>
#include <sstream>

namespace relay {
namespace {

// libpq names the offending part in double quotes. Option and query-parameter
// names are keys and stay; anything else (a token of a URI, a whole URI) may hold
// the password and is replaced by "...".
std::string without_values(const std::string& libpq_message) {
  std::string text = libpq_message;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const bool names_a_key = text.rfind("invalid connection option", 0) == 0 ||
                           text.rfind("invalid URI query parameter", 0) == 0;
  if (names_a_key) return text;
  std::string out;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '"') {
      if (!quoted) out += text[i];
      continue;
    }
    if (!quoted) {
      quoted = true;
      start = i + 1;
      continue;
    }
    quoted = false;
    const auto value = text.substr(start, i - start);
    out += value == "=" || value == "]" ? "\"" + value + "\"" : "\"...\"";
  }
  return out;
}

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

}  // namespace

std::optional<std::string> dsn_syntax_error(const std::string& dsn) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> options(PQconninfoParse(dsn.c_str(), &error),
                                                                         PQconninfoFree);
  if (!options) {
    std::string why = error ? without_values(error) : "out of memory";
    if (error) PQfreemem(error);
    return "not a valid libpq connection string or URI: " + why;
  }
  for (auto* o = options.get(); o->keyword; ++o) {
    if (!o->val) continue;
    const std::string key = o->keyword, value = o->val;
    if (key == "port" && !valid_port_list(value))
      return "port '" + value.substr(0, 32) + "' is not a number from 1 to 65535";
  }
  return std::nullopt;
}

std::optional<std::string> amqp_uri_syntax_error(const std::string& uri) {
  std::string copy = uri;  // amqp_parse_url writes into its argument
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(copy.data(), &info) != AMQP_STATUS_OK)
    return "not a valid amqp://user:password@host:port/vhost URI (a port of 1-65535, the vhost "
           "URL-encoded: %2f for /); the value is not shown, it may hold a password";
  return std::nullopt;
}

}  // namespace relay
