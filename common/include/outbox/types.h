#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Strong types for the names that travel with a message, so an exchange can
// never be passed where a routing key is expected.

#include <compare>
#include <cstdint>
#include <string>
#include <utility>

namespace outbox {

template <class Tag, class T = std::string>
class StrongType {
 public:
  StrongType() = default;
  explicit StrongType(T value) : value_(std::move(value)) {}
  const T& value() const { return value_; }
  auto operator<=>(const StrongType&) const = default;

 private:
  T value_{};
};

using Exchange = StrongType<struct ExchangeTag>;
using RoutingKey = StrongType<struct RoutingKeyTag>;
using MessageType = StrongType<struct MessageTypeTag>;
// The outbox row's identity (claim order), distinct from the message id.
using OutboxId = StrongType<struct OutboxIdTag, std::int64_t>;

}  // namespace outbox
