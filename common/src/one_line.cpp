#include "outbox/one_line.h"

namespace outbox {

std::string one_line(std::string_view text, std::size_t max_bytes) {
  static const char* digits = "0123456789abcdef";
  // PostgreSQL's DETAIL line quotes row data ("Failing row contains (...)": the
  // payload and headers; "Key (...)=(...)"): never past the primary message.
  if (auto at = text.find("\nDETAIL:"); at != std::string_view::npos) text = text.substr(0, at);
  // libpq and others end messages with a newline: trailing white space is dropped
  // rather than escaped.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0x0F]);
    } else out.push_back(static_cast<char>(c));
  }
  return out;
}

}  // namespace outbox
