#include "config/endpoint_syntax.h"

#include "outbox/rabbitmq_c.h"

#include <boost/asio/ip/address.hpp>

#include "outbox/one_line.h"
#include "outbox/pg_dsn_check.h"

namespace relay {

std::optional<std::string> amqp_uri_syntax_error(const std::string& uri) {
  std::string copy = uri;  // amqp_parse_url writes into its argument
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(copy.data(), &info) != AMQP_STATUS_OK || !outbox::plausible_host(info.host))
    return "not a valid amqp://user:password@host:port/vhost URI (a port of 1-65535, the vhost "
           "URL-encoded: %2f for /, and @, :, /, ?, # and % in the user and password "
           "percent-encoded); the value is not shown, it may hold a password";
  return std::nullopt;
}

ListenAddress parse_listen_address(const std::string& listen) {
  // "9187" and ":9187" name a port on kDefaultHttpHost.
  const auto colon = listen.rfind(':');
  std::string host = colon == std::string::npos || colon == 0 ? kDefaultHttpHost : listen.substr(0, colon);
  const std::string port_text = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (port_text.empty())
    throw std::invalid_argument("expected host:port or a port, e.g. 127.0.0.1:9187 or 9187, got '" +
                                outbox::one_line(listen, 80) + "'");
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535)
    throw std::invalid_argument("port must be a number from 0 to 65535, got '" + outbox::one_line(port_text, 20) + "'");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);  // the parser HttpServer binds with
  if (ec)
    throw std::invalid_argument("host must be an IP address (or localhost), got '" + outbox::one_line(host, 80) + "'");
  return {host, static_cast<unsigned short>(std::stoi(port_text))};
}

}  // namespace relay
