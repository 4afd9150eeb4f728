#include "config/rfc3339.h"

#include <regex>

namespace relay {
namespace {

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in(int y, int m) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : days[m - 1];
}

// Group n as a number, or -1 when the optional group did not match.
int number(const std::smatch& m, int n) { return m[n].matched ? std::stoi(m[n].str()) : -1; }

}  // namespace

std::optional<std::string> rfc3339_problem(const std::string& text) {
  // 1 year, 2 month, 3 day, 4 hour, 5 minute, 6 second, 7 offset sign, 8 offset hours, 9 offset minutes.
  static const std::regex form(
      R"((\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?)?(?:Z|([+-])(\d{2})(?::?(\d{2}))?)?)");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    return "is not an RFC 3339 time (2024-05-01, 2024-05-01T10:00:00Z, 2024-05-01T12:00:00+02:00)";
  const int year = number(m, 1), month = number(m, 2), day = number(m, 3);
  if (year < 1) return "has year 0000; years start at 0001";
  if (month < 1 || month > 12) return "has month " + m[2].str() + "; months are 01-12";
  if (day < 1 || day > days_in(year, month))
    return "has day " + m[3].str() + ", which month " + m[2].str() + " of " + m[1].str() + " does not have";
  if (number(m, 4) > 23) return "has hour " + m[4].str() + "; hours are 00-23";
  if (number(m, 5) > 59) return "has minute " + m[5].str() + "; minutes are 00-59";
  if (number(m, 6) > 59) return "has second " + m[6].str() + "; seconds are 00-59";
  if (number(m, 8) > 15 || number(m, 9) > 59) return "has a UTC offset beyond 15:59";
  return std::nullopt;
}

}  // namespace relay
