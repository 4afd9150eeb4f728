#include "config/bounded_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace relay {

BoundedRead read_bounded(const std::string& path, std::size_t limit) {
  BoundedRead out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.status = BoundedRead::Status::kCannotOpen;
    return out;
  }
  std::string text;
  char buf[65536];
  while (text.size() <= limit) {
    const std::size_t want = std::min(sizeof buf, limit + 1 - text.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      out.status = BoundedRead::Status::kReadError;
      return out;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (text.size() > limit) {
    out.status = BoundedRead::Status::kTooLarge;  // the text is dropped: it may be a secret
    return out;
  }
  out.text = std::move(text);
  return out;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0) return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace relay
