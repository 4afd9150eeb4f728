#include "outbox/amqp/amqp_uri.h"

#include "outbox/rabbitmq_c.h"

#include "outbox/amqp/amqp_error.h"
#include "outbox/error_text.h"
#include "outbox/one_line.h"

namespace outbox::amqp {

AmqpUri AmqpUri::parse(const std::string& uri, const std::string& key) {
  std::string buffer = uri;  // amqp_parse_url writes into its argument
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (const int rc = amqp_parse_url(buffer.data(), &info); rc != AMQP_STATUS_OK)
    throw AmqpError(key +
                        ": not a valid amqp://user:password@host:port/vhost URI "
                        "(percent-encode @, :, / and % in the user name and password)",
                    AmqpError::Fields::of_status(rc));
  AmqpUri parsed;
  parsed.host_ = info.host;
  parsed.port_ = info.port;
  parsed.vhost_ = info.vhost;
  parsed.user_ = info.user;
  parsed.password_ = info.password;
  parsed.tls_ = info.ssl != 0;
  return parsed;
}

std::string AmqpUri::endpoint() const {
  // One line even for a percent-encoded control byte in the host or vhost.
  return one_line(host_ + ":" + std::to_string(port_) + "/" + vhost_);
}

}  // namespace outbox::amqp
