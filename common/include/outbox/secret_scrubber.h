#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// SecretScrubber: removes every trace of known secrets from text meant for output.

#include <string>
#include <string_view>
#include <vector>

namespace outbox {

// Replaces each occurrence of a secret, and of any fragment of one that is at least
// `min_fragment` bytes long, with "[redacted]". A driver's error text may echo parts
// of a connection string (libpq's "could not translate host name ..."), so messages
// built from one pass through here before they are logged or printed.
// Immutable after construction; safe to share between threads.
class SecretScrubber {
 public:
  // Empty secrets are ignored.
  explicit SecretScrubber(std::vector<std::string> secrets, std::size_t min_fragment = 4);

  std::string scrub(std::string_view text) const;

 private:
  std::vector<std::string> secrets_;
  std::size_t min_fragment_;
};

}  // namespace outbox
