#include "outbox/error_text.h"

#include <cstdio>

namespace outbox {
namespace {

// Appends byte `u` escaped when it is a control byte; false when it was not one.
bool append_control(std::string& out, unsigned char u) {
  if (u == '\n') out += "\\n";
  else if (u == '\r') out += "\\r";
  else if (u == '\t') out += "\\t";
  else if (u < 0x20 || u == 0x7f) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    out += buf;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string quoted_value(std::string_view value, std::size_t max_bytes) {
  std::string out = "'";
  const std::size_t shown = value.size() > max_bytes ? max_bytes : value.size();
  for (std::size_t i = 0; i < shown; ++i) {
    const auto u = static_cast<unsigned char>(value[i]);
    if (append_control(out, u)) continue;
    if (u == '\\' || u == '\'') {
      out += '\\';
      out += static_cast<char>(u);
    } else if (u >= 0x80) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += static_cast<char>(u);
    }
  }
  out += "'";
  if (shown < value.size()) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

}  // namespace outbox
