#pragma once
// DiskProbe: the machine's disk, measured beside a run. Every message a relay
// publishes waits on two disks' flushes: the producer's COMMIT (PostgreSQL's WAL) and
// the broker's write before its confirm. On a virtual machine the time one flush
// takes changes with the host's other work; a soak that reads only its own latencies
// cannot tell a slower relay from a slower disk (docs/perf/NOTEBOOK.md, round
// thirteen). So one thread writes 4 KiB and fdatasync()s it every 100 ms, in a file of
// the servers' directory (unlinked at once: a killed run leaves nothing), and each
// interval's flush times are the disk's figure for that interval, measured in the
// same run as the latencies it explains.
//
// Thread safety: take() from one thread at a time; the probe runs on its own thread.
// Owns a file descriptor and a thread: not copyable.

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bench {

class DiskProbe {
 public:
  // Starts probing in `dir`; throws BenchError naming `option` and `dir` when it
  // cannot write a file there.
  DiskProbe(const std::string& dir, const std::string& option);
  ~DiskProbe();
  DiskProbe(const DiskProbe&) = delete;
  DiskProbe& operator=(const DiskProbe&) = delete;

  // The flush times (write + fdatasync, microseconds) since the last take(). Throws
  // BenchError if a write or flush failed (the disk full, the directory gone).
  std::vector<double> take();

 private:
  void loop();

  int fd_ = -1;
  std::mutex mutex_;
  std::vector<double> us_;
  std::string error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace bench
