#include "outbox/header_rules.h"

namespace outbox {

const std::vector<ReservedHeader>& reserved_headers() {
  // RabbitMQ's own list of the headers it uses (3.13+ treats x- headers as the
  // broker's), plus the delayed-message exchange plugin's x-delay.
  static const std::vector<ReservedHeader> all = {
      {"x-outbox-", true, "names starting with 'x-outbox-' are the relay's"},
      {"CC", false, "RabbitMQ also routes the message to the routing keys it lists"},
      {"BCC", false, "RabbitMQ also routes the message to the routing keys it lists, then removes it"},
      {"x-death", false, "RabbitMQ sets it when it dead-letters a message"},
      {"x-first-death-", true, "RabbitMQ sets these when it dead-letters a message"},
      {"x-last-death-", true, "RabbitMQ sets these when it dead-letters a message"},
      {"x-delivery-count", false, "RabbitMQ quorum queues set it on delivery"},
      {"x-received-from", false, "RabbitMQ federation sets it and detects cycles by it"},
      {"x-stream-filter-value", false, "RabbitMQ streams read it as the message's filter value"},
      {"x-stream-offset", false, "RabbitMQ streams set it on delivery"},
      {"x-delay", false, "the delayed-message exchange plugin holds the message back by it"},
      {"x-shovelled", false, "RabbitMQ shovels set it"},
      {"x-shovelled-timestamp", false, "RabbitMQ shovels set it"},
      {"x-mqtt-publish-qos", false, "RabbitMQ's MQTT plugin sets it"},
      {"x-amqp-1.0-", true, "RabbitMQ's AMQP 1.0 conversion uses these"},
  };
  return all;
}

std::optional<ReservedHeader> reserved_header(std::string_view name) {
  for (const auto& r : reserved_headers())
    if (r.prefix ? name.substr(0, r.name.size()) == r.name : name == r.name) return r;
  return std::nullopt;
}

std::size_t header_entries_bytes(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::size_t n = 0;
  for (const auto& [name, value] : headers) n += 1 + name.size() + 1 + 4 + value.size();
  return n;
}

}  // namespace outbox
