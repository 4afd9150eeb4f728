// StageCpu: the relay loop thread's CPU time charged to the stage it was spent in.
#include "metrics/stage_cpu.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using relay::CpuStage;
using relay::StageCpu;

namespace {

// Burns `ms` of this thread's CPU time (not wall time: a loaded machine only slows it).
void burn_ms(int ms) {
  const auto until = relay::thread_cpu_ns() + static_cast<std::int64_t>(ms) * 1000000;
  while (relay::thread_cpu_ns() < until) {
  }
}

}  // namespace

TEST_CASE("CPU spent inside a scope is charged to its stage and to that stage's counter only") {
  outbox::metrics::Registry r;
  auto& claim = r.counter("c", "claim");
  auto& mark = r.counter("m", "mark");
  StageCpu cpu({&claim, nullptr, nullptr, nullptr, &mark});
  StageCpu::Install install(cpu);
  {
    StageCpu::Scope scope(CpuStage::kClaim);
    burn_ms(20);
  }
  burn_ms(10);  // outside any scope: charged to nothing
  CHECK(cpu.seconds(CpuStage::kClaim) >= 0.020);
  CHECK(cpu.seconds(CpuStage::kClaim) < 0.030);
  CHECK(claim.value() == doctest::Approx(cpu.seconds(CpuStage::kClaim)));
  CHECK(cpu.seconds(CpuStage::kMark) == 0);
  CHECK(mark.value() == 0);
  CHECK(cpu.seconds(CpuStage::kPublish) == 0);
}

TEST_CASE("a nested scope's time is charged to it alone and the outer stage resumes after it") {
  StageCpu cpu;
  StageCpu::Install install(cpu);
  const auto start = relay::thread_cpu_ns();
  {
    StageCpu::Scope publish(CpuStage::kPublish);
    burn_ms(10);
    {
      StageCpu::Scope settle(CpuStage::kSettle);
      burn_ms(15);
    }
    burn_ms(10);
  }
  const double total = (relay::thread_cpu_ns() - start) / 1e9;
  const double publish = cpu.seconds(CpuStage::kPublish), settle = cpu.seconds(CpuStage::kSettle);
  CHECK(publish >= 0.020);
  CHECK(settle >= 0.015);
  // Exclusive: the two add up to no more than the thread spent, so neither holds the other's time.
  CHECK(publish + settle <= total);
  CHECK(settle <= total - 0.020);
}

TEST_CASE("time a scope spends off the CPU (sleeping, waiting for a server) costs its stage nothing") {
  StageCpu cpu;
  StageCpu::Install install(cpu);
  {
    StageCpu::Scope scope(CpuStage::kSettle);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(cpu.seconds(CpuStage::kSettle) < 0.010);
}

TEST_CASE("a scope on a thread with no StageCpu installed charges nothing; Install restores the previous one") {
  StageCpu outer, inner;
  {
    StageCpu::Scope scope(CpuStage::kDecode);  // nothing installed yet
    burn_ms(5);
  }
  CHECK(outer.seconds(CpuStage::kDecode) == 0);
  StageCpu::Install a(outer);
  {
    StageCpu::Install b(inner);
    StageCpu::Scope scope(CpuStage::kDecode);
    burn_ms(5);
  }
  {
    StageCpu::Scope scope(CpuStage::kDecode);
    burn_ms(5);
  }
  CHECK(inner.seconds(CpuStage::kDecode) >= 0.005);
  CHECK(outer.seconds(CpuStage::kDecode) >= 0.005);
  CHECK(outer.seconds(CpuStage::kDecode) < 0.010);
  // Another thread has none installed: its scopes charge nothing here.
  std::thread([] {
    StageCpu::Scope scope(CpuStage::kMark);
    burn_ms(5);
  }).join();
  CHECK(outer.seconds(CpuStage::kMark) == 0);
}

TEST_CASE("the stages are named as the metric's label values") {
  CHECK(std::string(relay::cpu_stage_name(CpuStage::kClaim)) == "claim");
  CHECK(std::string(relay::cpu_stage_name(CpuStage::kDecode)) == "decode");
  CHECK(std::string(relay::cpu_stage_name(CpuStage::kPublish)) == "publish");
  CHECK(std::string(relay::cpu_stage_name(CpuStage::kSettle)) == "settle");
  CHECK(std::string(relay::cpu_stage_name(CpuStage::kMark)) == "mark");
}
