#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Delivery: one AMQP message as a consumer handler sees it.

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "outbox/message_id.h"

namespace outbox {

struct Delivery {
  MessageId message_id;  // the AMQP message_id (a UUID, required)
  std::string type;      // the AMQP type property, e.g. "OrderPlaced"
  std::string exchange;  // where it was published
  std::string routing_key;
  std::string content_type;
  std::string body;  // the payload, unchanged
  std::optional<std::string> correlation_id;
  // Application headers with string, integer or boolean values (as text).
  std::map<std::string, std::string> headers;
  // The AMQP timestamp property (whole seconds), when the producer set one the clock
  // can hold (up to the year 2262; a larger value is left absent).
  std::optional<std::chrono::system_clock::time_point> timestamp;
  bool redelivered = false;  // the broker's redelivered flag
  // 1 on the first try seen by this process; on a quorum queue at least one more
  // than the broker's x-delivery-count (returns by any consumer, crashed ones too).
  int attempt = 1;
};

}  // namespace outbox
