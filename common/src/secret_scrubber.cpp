#include "outbox/secret_scrubber.h"

#include <algorithm>

namespace outbox {

SecretScrubber::SecretScrubber(std::vector<std::string> secrets, std::size_t min_fragment)
    : min_fragment_(std::max<std::size_t>(1, min_fragment)) {
  for (auto& s : secrets)
    if (!s.empty()) secrets_.push_back(std::move(s));
}

std::string SecretScrubber::scrub(std::string_view text) const {
  std::vector<bool> hidden(text.size(), false);
  for (const auto& secret : secrets_) {
    // A secret shorter than a fragment is hidden where it occurs whole.
    const std::size_t least = std::min(secret.size(), min_fragment_);
    for (std::size_t i = 0; i < text.size(); ++i) {
      // The longest piece of the secret that starts at text[i].
      std::size_t longest = 0;
      for (std::size_t j = 0; j < secret.size(); ++j) {
        std::size_t n = 0;
        while (i + n < text.size() && j + n < secret.size() && text[i + n] == secret[j + n]) ++n;
        longest = std::max(longest, n);
      }
      if (longest >= least) std::fill(hidden.begin() + i, hidden.begin() + i + longest, true);
    }
  }
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!hidden[i]) {
      out += text[i];
    } else if (i == 0 || !hidden[i - 1]) {
      out += "[redacted]";
    }
  }
  return out;
}

}  // namespace outbox
