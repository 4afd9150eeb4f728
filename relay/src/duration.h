#pragma once
// Durations as operators write them: "90s", "30m", "12h", "7d".

#include <chrono>
#include <string>

namespace relay {

// Parses a positive whole number followed by a unit: s, m, h or d ("7d").
// Throws std::invalid_argument with a one-line reason naming the text. Pure.
std::chrono::seconds parse_duration(const std::string& text);

// The inverse for messages: the largest unit that divides exactly ("7d", "90m").
std::string format_duration(std::chrono::seconds duration);

}  // namespace relay
