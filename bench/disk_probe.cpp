#include "disk_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "amqp_bench_client.h"

namespace bench {
namespace {

constexpr std::size_t kBytes = 4096;
constexpr auto kEvery = std::chrono::milliseconds(100);

}  // namespace

DiskProbe::DiskProbe(const std::string& dir, const std::string& option) {
  std::string path = dir + "/outbox-bench-disk-XXXXXX";
  fd_ = ::mkstemp(path.data());
  if (fd_ < 0)
    throw BenchError(option + ": cannot write a file in '" + dir + "' (" + std::strerror(errno) +
                     "): name a directory on the servers' disk, or 'off'");
  ::unlink(path.c_str());  // the descriptor keeps it; nothing is left however the run ends
  thread_ = std::thread([this] { loop(); });
}

DiskProbe::~DiskProbe() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
}

std::vector<double> DiskProbe::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) throw BenchError("disk probe: " + error_);
  std::vector<double> out;
  out.swap(us_);
  return out;
}

void DiskProbe::loop() {
  std::vector<char> block(kBytes, '\x5a');
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    const auto t0 = std::chrono::steady_clock::now();
    // The same block each time: a flush of data, not of a growing file's metadata.
    const bool ok = ::pwrite(fd_, block.data(), block.size(), 0) == static_cast<ssize_t>(block.size()) &&
                    ::fdatasync(fd_) == 0;
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok) {
        error_ = std::string("write or fdatasync failed: ") + std::strerror(errno);
        return;
      }
      us_.push_back(us);
    }
    next += kEvery;
    // A flush longer than the period starts the next one at once, without catching up.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();
    while (!stop_ && std::chrono::steady_clock::now() < next)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace bench
