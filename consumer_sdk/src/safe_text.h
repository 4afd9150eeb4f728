#pragma once
// safe_text: the consumer's old name for outbox::one_line (outbox/one_line.h), kept
// only for amqp_consumer.cpp while it moves into the amqp/ library; new code calls
// outbox::one_line. Delete this header once nothing includes it.

#include <cstddef>
#include <string>
#include <string_view>

#include "outbox/one_line.h"

namespace outbox::detail {

// outbox::one_line with the consumer's former cap of 500 bytes. Pure; thread-safe.
inline std::string safe_text(std::string_view text, std::size_t max_bytes = 500) {
  return one_line(text, max_bytes);
}

}  // namespace outbox::detail
