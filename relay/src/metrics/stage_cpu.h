#pragma once
// StageCpu: the relay loop thread's CPU time, split by what it was doing.

#include <array>
#include <cstddef>
#include <cstdint>

#include "outbox/metrics.h"

namespace relay {

// What the relay loop's thread spends CPU on, per batch (label `stage` of
// outbox_relay_stage_cpu_seconds_total).
enum class CpuStage : std::size_t {
  kClaim,    // the claim's round trip: BEGIN, the statement, libpq reading the result
  kDecode,   // OutboxStore turning the claim's result into ClaimedRows
  kPublish,  // payload fetches and basic.publish (encoding, writing the socket)
  kSettle,   // reading broker events (acks, nacks, returns) and FailurePolicy
  kMark,     // marking (or deleting) the batch's rows, and the commit
};
constexpr std::size_t kCpuStages = 5;
const char* cpu_stage_name(CpuStage stage);

// Charges the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) to stages.
// Scopes nest, and time is exclusive: a Scope of kSettle opened inside one of
// kPublish (acks read while publishing) charges its time to kSettle only, and
// kPublish resumes when it closes. Time outside any scope is charged to nothing.
//
// A StageCpu is installed on one thread (Install), and a Scope finds it there, so
// code deep in a call (OutboxStore's decoding) marks its stage without being handed
// the accounting; on a thread with none installed a Scope does nothing. One
// clock_gettime per scope boundary, a system call (about 0.3 us measured here, the
// thread clock has no vDSO path): meant per batch or per call, not per row.
//
// Thread safety: one thread uses a StageCpu (the one it is installed on); the
// counters it feeds may be read from any thread. Not copyable.
class StageCpu {
 public:
  // `sinks[stage]` (may be null) receives that stage's seconds as they are charged.
  explicit StageCpu(std::array<outbox::metrics::Counter*, kCpuStages> sinks = {});
  StageCpu(const StageCpu&) = delete;
  StageCpu& operator=(const StageCpu&) = delete;

  // Seconds charged to `stage` so far.
  double seconds(CpuStage stage) const;

  // Makes `cpu` the calling thread's StageCpu for the Install's lifetime (the
  // previous one, if any, comes back after).
  class Install {
   public:
    explicit Install(StageCpu& cpu);
    ~Install();
    Install(const Install&) = delete;
    Install& operator=(const Install&) = delete;

   private:
    StageCpu* previous_;
  };

  // Charges the thread's CPU time to `stage` from construction to destruction
  // (minus nested scopes), on the thread's installed StageCpu; a no-op without one.
  class Scope {
   public:
    explicit Scope(CpuStage stage);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StageCpu* cpu_;
    int previous_ = -1;  // the stage charged before this scope (-1: none)
  };

 private:
  // Charges the time since the last switch to the current stage, then makes
  // `next` (-1: none) current. Returns the stage that was current.
  int switch_to(int next);

  std::array<outbox::metrics::Counter*, kCpuStages> sinks_;
  std::array<std::int64_t, kCpuStages> ns_{};
  int current_ = -1;
  std::int64_t since_ns_ = 0;
};

// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
std::int64_t thread_cpu_ns();

}  // namespace relay
