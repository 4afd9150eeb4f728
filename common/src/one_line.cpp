#include "outbox/one_line.h"

namespace outbox {
namespace {

const char* const kDigits = "0123456789abcdef";

void escape_byte(std::string& out, unsigned char c) {
  out += "\\x";
  out.push_back(kDigits[c >> 4]);
  out.push_back(kDigits[c & 0x0F]);
}

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 when there is none.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = byte(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return n;
}

// Characters that are valid UTF-8 but steer a terminal or the order text is shown
// in: C1 controls (U+009B is CSI, U+009D OSC: a terminal in UTF-8 mode acts on them as
// on ESC [ and ESC ]), line and paragraph separators, and the bidirectional marks,
// embeddings, overrides and isolates (text that reads differently than it is).
bool steers_display(std::string_view text, std::size_t i, std::size_t n) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  if (n == 2)
    return (byte(0) == 0xC2 && byte(1) <= 0x9F) ||  // U+0080-U+009F
           (byte(0) == 0xD8 && byte(1) == 0x9C);    // U+061C
  if (n != 3 || byte(0) != 0xE2) return false;
  if (byte(1) == 0x80)  // U+200E, U+200F; U+2028-U+202E
    return byte(2) == 0x8E || byte(2) == 0x8F || (byte(2) >= 0xA8 && byte(2) <= 0xAE);
  return byte(1) == 0x81 && byte(2) >= 0xA6 && byte(2) <= 0xA9;  // U+2066-U+2069
}

}  // namespace

std::string one_line(std::string_view text, std::size_t max_bytes) {
  // PostgreSQL's DETAIL line quotes row data ("Failing row contains (...)": the
  // payload and headers; "Key (...)=(...)"): never past the primary message.
  if (auto at = text.find("\nDETAIL:"); at != std::string_view::npos) text = text.substr(0, at);
  // libpq and others end messages with a newline: trailing white space is dropped
  // rather than escaped.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    // A multibyte character is copied whole or not at all, and a malformed one
    // escaped: the result is valid UTF-8 whatever came in (a broker's reply text cut
    // at 255 bytes inside a character, say), so PostgreSQL's text columns take it.
    const std::size_t n = c < 0x80 ? 1 : utf8_sequence(text, i);
    if (out.size() + (n ? n : 1) > max_bytes) {
      out += "...";
      break;
    }
    if (n > 1 && steers_display(text, i, n)) {
      if (out.size() + 4 * n > max_bytes) {
        out += "...";
        break;
      }
      for (std::size_t k = 0; k < n; ++k) escape_byte(out, static_cast<unsigned char>(text[i + k]));
    } else if (n > 1) out.append(text.substr(i, n));
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (n == 0 || c < 0x20 || c == 0x7f) escape_byte(out, c);
    else out.push_back(static_cast<char>(c));
    i += n ? n : 1;
  }
  return out;
}

}  // namespace outbox
