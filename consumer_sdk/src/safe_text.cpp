#include "safe_text.h"

#include <cstdio>

namespace outbox::detail {

std::string safe_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else out += c;
  }
  return out;
}

}  // namespace outbox::detail
