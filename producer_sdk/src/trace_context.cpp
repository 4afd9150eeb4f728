#include "outbox/trace_context.h"

#include <set>

#include "outbox/error_text.h"
#include "outbox/errors.h"
#include "outbox/header_rules.h"

namespace outbox {
namespace {

bool lower_hex(const std::string& s, std::size_t from, std::size_t n) {
  if (s.size() < from + n) return false;
  for (std::size_t i = from; i < from + n; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

bool all_zero(const std::string& s, std::size_t from, std::size_t n) {
  return s.find_first_not_of('0', from) >= from + n;
}

std::string shown(const std::string& v) { return quoted_value(v, 64); }

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

// key = simple-key / multi-tenant-key (tenant-id "@" system-id).
bool valid_key(const std::string& k) {
  auto at = k.find('@');
  auto chars_ok = [](const std::string& s) {
    for (char c : s)
      if (!key_char(c)) return false;
    return true;
  };
  if (at == std::string::npos) return !k.empty() && k.size() <= 256 && k[0] >= 'a' && k[0] <= 'z' && chars_ok(k);
  const std::string tenant = k.substr(0, at), system = k.substr(at + 1);
  return !tenant.empty() && tenant.size() <= 241 &&
         ((tenant[0] >= 'a' && tenant[0] <= 'z') || (tenant[0] >= '0' && tenant[0] <= '9')) && chars_ok(tenant) &&
         !system.empty() && system.size() <= 14 && system[0] >= 'a' && system[0] <= 'z' && chars_ok(system);
}

bool valid_value(const std::string& v) {
  if (v.empty() || v.size() > 256 || v.back() == ' ') return false;
  for (char c : v)
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  return true;
}

}  // namespace

void validate_traceparent(const std::string& v, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return ValidationError(field, why + ", got " + shown(v) +
                                      " (expected 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>)");
  };
  // First, as the SQL contract's outbox_check_trace: the writer stores the value as
  // a header, and the table's CHECK outbox_header_values refuses one above
  // kHeaderValueMax (a later version may be longer than 55 characters).
  if (v.size() > kHeaderValueMax)
    throw ValidationError(field, "is " + std::to_string(v.size()) + " bytes, the limit is " +
                                     std::to_string(kHeaderValueMax) + " (a header value's)");
  if (v.size() < 55 || !lower_hex(v, 0, 2) || v[2] != '-' || !lower_hex(v, 3, 32) || v[35] != '-' ||
      !lower_hex(v, 36, 16) || v[52] != '-' || !lower_hex(v, 53, 2))
    throw bad("is not a W3C traceparent");
  if (v.compare(0, 2, "ff") == 0) throw bad("version ff is invalid");
  if (v.compare(0, 2, "00") == 0 && v.size() != 55) throw bad("version 00 has exactly 55 characters");
  if (v.size() > 55 && v[55] != '-') throw bad("is not a W3C traceparent");
  if (all_zero(v, 3, 32)) throw bad("the trace id must not be all zeros");
  if (all_zero(v, 36, 16)) throw bad("the parent id must not be all zeros");
}

void validate_tracestate(const std::string& v, const std::string& field) {
  if (v.size() > 512) throw ValidationError(field, "is " + std::to_string(v.size()) + " bytes, at most 512 allowed");
  std::set<std::string> keys;
  std::size_t start = 0;
  while (start <= v.size()) {
    auto end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    std::string member = v.substr(start, end - start);
    auto first = member.find_first_not_of(" \t");
    auto last = member.find_last_not_of(" \t");
    member = first == std::string::npos ? "" : member.substr(first, last - first + 1);
    if (!member.empty()) {
      auto eq = member.find('=');
      if (eq == std::string::npos || !valid_key(member.substr(0, eq)) || !valid_value(member.substr(eq + 1)))
        throw ValidationError(field, "member " + shown(member) + " is not a valid key=value list member");
      if (!keys.insert(member.substr(0, eq)).second)
        throw ValidationError(field, "key " + shown(member.substr(0, eq)) + " appears twice");
      if (keys.size() > 32) throw ValidationError(field, "has more than 32 list members");
    }
    start = end + 1;
  }
}

}  // namespace outbox
