#pragma once
// Checks an RFC 3339 time as operators give it to `replay --since`, so an
// impossible date is a usage error (exit 2) naming the argument, not a PostgreSQL
// error (exit 1) after connecting.

#include <optional>
#include <string>

namespace relay {

// Why `text` is not a time PostgreSQL reads as the instant the operator meant, or
// nullopt when it is one: YYYY-MM-DD, optionally followed by [T ]hh:mm[:ss[.ffffff]],
// optionally followed by Z or +hh[[:]mm] / -hh[[:]mm]. Year 0001-9999, a month of
// 1-12, a day that exists in that month (leap years included), hours 0-23, minutes
// and seconds 0-59, a UTC offset of at most 15:59 (PostgreSQL's limit). Pure.
std::optional<std::string> rfc3339_problem(const std::string& text);

}  // namespace relay
