#pragma once
// The relay's old name for outbox::one_line (outbox/one_line.h), kept only for
// amqp_publisher.cpp while it moves into the amqp/ library; new code calls
// outbox::one_line. Delete this header once nothing includes it.

#include "outbox/one_line.h"

namespace relay {
using outbox::one_line;
}  // namespace relay
