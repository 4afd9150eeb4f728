#include "outbox/bounded_read.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace outbox {
namespace {

std::string type_text(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Opens `path` without blocking and checks its type on the descriptor (so it cannot
// be swapped between the check and the read). -1 with `out` saying why, or the fd.
int open_regular(const std::string& path, BoundedRead& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    out.status = BoundedRead::Status::kCannotOpen;
    out.cause = std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out.status = BoundedRead::Status::kNotRegular;
    out.cause = "it is " + type_text(st.st_mode);
    ::close(fd);
    return -1;
  }
  out.mode = static_cast<unsigned>(st.st_mode);
  return fd;
}

}  // namespace

BoundedRead::~BoundedRead() { OPENSSL_cleanse(text.data(), text.size()); }

std::string BoundedRead::why(std::size_t limit) const {
  switch (status) {
    case Status::kOk: return "";
    case Status::kCannotOpen: return "cannot open: " + cause;
    case Status::kNotRegular: return cause + (cause == "not a regular file" ? "" : ", not a regular file");
    case Status::kTooLarge: return "larger than " + size_text(limit);
    case Status::kReadError: return "cannot read: " + cause;
  }
  return cause;
}

BoundedRead read_bounded(const std::string& path, std::size_t limit) {
  BoundedRead out;
  const int fd = open_regular(path, out);
  if (fd < 0) return out;
  // One allocation for any file within the limit: no stray copies of a secret left
  // in freed memory by the string growing.
  out.text.reserve(limit + 1);
  char buf[65536];
  while (out.text.size() <= limit) {
    const std::size_t want = std::min(sizeof buf, limit + 1 - out.text.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.status = BoundedRead::Status::kReadError;
      out.cause = std::strerror(errno);
      break;
    }
    if (n == 0) break;
    out.text.append(buf, static_cast<std::size_t>(n));
  }
  OPENSSL_cleanse(buf, sizeof buf);
  ::close(fd);
  if (out.status == BoundedRead::Status::kOk && out.text.size() > limit)
    out.status = BoundedRead::Status::kTooLarge;  // the text is dropped: it may be a secret
  if (out.status != BoundedRead::Status::kOk) {
    OPENSSL_cleanse(out.text.data(), out.text.size());
    out.text.clear();
  }
  return out;
}

BoundedRead probe_regular_file(const std::string& path) {
  BoundedRead out;
  const int fd = open_regular(path, out);
  if (fd >= 0) ::close(fd);
  return out;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0) return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace outbox
