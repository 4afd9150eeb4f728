#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Reading a file the tools are given, the one way every file is read: the relay's
// configuration and its ${file:PATH} secrets, keyring files, event schemas.

#include <cstddef>
#include <string>

namespace outbox {

// What read_bounded found. The text is wiped from memory when this is destroyed: it
// may be a keyring or a password.
// Thread safety: a plain value.
struct BoundedRead {
  enum class Status { kOk, kCannotOpen, kNotRegular, kTooLarge, kReadError };
  Status status = Status::kOk;
  std::string text;   // the whole file when kOk; otherwise empty
  std::string cause;  // why not, for people: "it is a FIFO", "No such file or directory"
  unsigned mode = 0;  // st_mode of the file opened (kOk, kTooLarge): its permission bits

  BoundedRead() = default;
  BoundedRead(BoundedRead&&) noexcept = default;
  BoundedRead& operator=(BoundedRead&&) noexcept = default;
  BoundedRead(const BoundedRead&) = delete;
  BoundedRead& operator=(const BoundedRead&) = delete;
  ~BoundedRead();

  bool ok() const { return status == Status::kOk; }
  // "cannot open: No such file or directory", "it is a FIFO, not a regular file",
  // "larger than 1 MiB", "cannot read: ..."; `limit` is the one read_bounded had.
  std::string why(std::size_t limit) const;
};

// The file at `path`, when it is a regular file of at most `limit` bytes. Opened with
// O_NONBLOCK (and O_NOCTTY, O_CLOEXEC), so a FIFO without a writer, a device or a
// socket cannot block the open; the descriptor's type is checked (fstat) before a
// byte is read, and anything but a regular file is refused (kNotRegular), so a path
// given by mistake (/dev/zero, a FIFO, /dev/tty) is refused at once. Reads at most
// limit + 1 bytes, so a file that grows while read cannot exhaust memory.
BoundedRead read_bounded(const std::string& path, std::size_t limit);

// Checks, without reading it, that `path` opens (the same way) as a regular file, for
// files another library reads itself (TLS certificates and keys). kOk or why not.
BoundedRead probe_regular_file(const std::string& path);

// "1 MiB", "64 KiB", "512 bytes": a limit for people.
std::string size_text(std::size_t bytes);

}  // namespace outbox
