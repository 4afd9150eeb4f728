#include "metrics/stage_cpu.h"

#include <ctime>

namespace relay {
namespace {

thread_local StageCpu* installed = nullptr;

}  // namespace

std::int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* cpu_stage_name(CpuStage stage) {
  static constexpr const char* kNames[kCpuStages] = {"claim", "decode", "publish", "settle", "mark"};
  return kNames[static_cast<std::size_t>(stage)];
}

StageCpu::StageCpu(std::array<outbox::metrics::Counter*, kCpuStages> sinks) : sinks_(sinks) {}

double StageCpu::seconds(CpuStage stage) const { return ns_[static_cast<std::size_t>(stage)] / 1e9; }

int StageCpu::switch_to(int next) {
  const std::int64_t now = thread_cpu_ns();
  if (current_ >= 0) {
    const std::int64_t spent = now - since_ns_;
    ns_[static_cast<std::size_t>(current_)] += spent;
    if (auto* sink = sinks_[static_cast<std::size_t>(current_)]) sink->inc(spent / 1e9);
  }
  since_ns_ = now;
  const int was = current_;
  current_ = next;
  return was;
}

StageCpu::Install::Install(StageCpu& cpu) : previous_(installed) { installed = &cpu; }

StageCpu::Install::~Install() { installed = previous_; }

StageCpu::Scope::Scope(CpuStage stage) : cpu_(installed) {
  if (cpu_) previous_ = cpu_->switch_to(static_cast<int>(stage));
}

StageCpu::Scope::~Scope() {
  if (cpu_) cpu_->switch_to(previous_);
}

}  // namespace relay
