#include "outbox/duration.h"

#include <stdexcept>

#include "outbox/one_line.h"

namespace outbox {

std::chrono::seconds parse_duration(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + one_line(text, 40) + "' is not a duration: " + why +
                                 " (e.g. 90s, 30m, 12h, 7d)");
  };
  if (text.size() < 2) throw bad("expected a number and a unit");
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw bad("expected a whole number before the unit");
  const long long n = std::stoll(digits);
  if (n <= 0) throw bad("must be positive");
  switch (text.back()) {
    case 's': return std::chrono::seconds(n);
    case 'm': return std::chrono::seconds(n * 60);
    case 'h': return std::chrono::seconds(n * 3600);
    case 'd': return std::chrono::seconds(n * 86400);
    default: throw bad("the unit must be s, m, h or d");
  }
}

std::string format_duration(std::chrono::seconds duration) {
  const long long s = duration.count();
  if (s != 0 && s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s != 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s != 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace outbox
