#pragma once
// The relay's old names for outbox/duration.h, kept only for config.cpp (whose
// enum rework is in flight elsewhere); new code calls outbox::parse_duration,
// outbox::format_duration and outbox::kMaxAge. Delete once nothing includes it.

#include "outbox/duration.h"

namespace relay {
using outbox::format_duration;
using outbox::kMaxAge;
using outbox::parse_duration;
}  // namespace relay
