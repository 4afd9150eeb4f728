#include "outbox/pg_array.h"

namespace outbox::pg {
namespace {

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

}  // namespace

std::string text_array(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    if (items[i]) append_quoted(out, *items[i]);
    else out += "NULL";
  }
  out.push_back('}');
  return out;
}

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    append_quoted(out, items[i]);
  }
  out.push_back('}');
  return out;
}

std::string bigint_array(const std::vector<std::int64_t>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(items[i]);
  }
  out.push_back('}');
  return out;
}

std::string bytea_array(const std::vector<std::string_view>& items) {
  static const char* digits = "0123456789abcdef";
  std::size_t total = 2;
  for (auto s : items) total += s.size() * 2 + 6;
  std::string out;
  out.reserve(total);
  out.push_back('{');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out += "\"\\\\x";  // "\\x : the array parser turns \\ into one backslash
    for (unsigned char c : items[i]) {
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0x0F]);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

}  // namespace outbox::pg
