#pragma once
// Reading a file the configuration names, with a size limit: the configuration file
// itself and the ${file:PATH} secrets in it.

#include <cstddef>
#include <string>

namespace relay {

// What read_bounded found.
struct BoundedRead {
  enum class Status { kOk, kCannotOpen, kTooLarge, kReadError };
  Status status = Status::kOk;
  std::string text;  // the whole file when kOk; otherwise empty
};

// The file at `path`, when it holds at most `limit` bytes. Reads at most limit + 1
// bytes whatever the file is, so /dev/zero, an endless pipe or a huge file costs
// limit + 1 bytes of memory and stops, rather than growing until the process dies.
BoundedRead read_bounded(const std::string& path, std::size_t limit);

// "1 MiB", "64 KiB", "512 bytes": a limit for people.
std::string size_text(std::size_t bytes);

}  // namespace relay
