#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Durations as operators write them: "90s", "30m", "12h", "7d".

#include <chrono>
#include <string>

namespace outbox {

// The longest age the relay accepts (retention.keep, cleanup --older-than, replay
// --since): ten years. Far longer and now() minus the age leaves PostgreSQL's
// timestamp range, so every run would fail instead of the file being refused.
constexpr std::chrono::seconds kMaxAge{3650LL * 86400};

// Parses a positive whole number followed by a unit: s, m, h or d ("7d").
// Throws std::invalid_argument with a one-line reason naming the text. Pure.
std::chrono::seconds parse_duration(const std::string& text);

// The inverse for messages: the largest unit that divides exactly ("7d", "90m").
std::string format_duration(std::chrono::seconds duration);

}  // namespace outbox
