// The microVM's sandbox::metrics (isolation/microvm/guest_usage.h): the
// guest's answers checked against the VM, the CPU share from the delta of
// its ticks, and a paused VM answered from the sample before its pause.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>

#include "isolation/microvm/guest_usage.h"

namespace skiff::microvm {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1ull << 20;

proto::UsageResult Sample(uint64_t busy, uint64_t total, uint64_t mem_used = 100 * kMiB) {
  return proto::UsageResult{2, busy, total, mem_used, 480 * kMiB, 10 * kMiB, 512 * kMiB};
}

// A probe answering `samples` in turn (an error once they run out).
struct Script {
  std::deque<Result<proto::UsageResult>> samples;
  int calls = 0;
  UsageProbe probe() {
    return [this]() -> Result<proto::UsageResult> {
      calls++;
      if (samples.empty()) return Platform("sandbox", "agent hung up");
      auto r = std::move(samples.front());
      samples.pop_front();
      return r;
    };
  }
};

TEST(MicrovmGuestUsage, FirstReadSamplesTwiceThenDeltasSinceThePrevious) {
  GuestUsage g(2, 512 * kMiB, 1ms);
  Script s;
  s.samples = {Sample(100, 1000), Sample(150, 1100), Sample(150, 1300), Sample(350, 1500)};
  auto first = g.Read(s.probe());
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(s.calls, 2);
  EXPECT_DOUBLE_EQ(first->cpu_used_pct, 50.0);
  EXPECT_EQ(first->cpu_count, 2u);  // the VM's vCPUs
  EXPECT_EQ(first->mem_used_bytes, 100 * kMiB);
  EXPECT_EQ(first->mem_total_bytes, 480 * kMiB);
  EXPECT_EQ(first->disk_used_bytes, 10 * kMiB);
  EXPECT_EQ(first->disk_total_bytes, 512 * kMiB);
  auto idle = g.Read(s.probe());
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(s.calls, 3);
  EXPECT_DOUBLE_EQ(idle->cpu_used_pct, 0.0);
  auto busy = g.Read(s.probe());
  ASSERT_TRUE(busy.ok());
  EXPECT_DOUBLE_EQ(busy->cpu_used_pct, 100.0);
}

TEST(MicrovmGuestUsage, NoTickSinceThePreviousKeepsItsShare) {
  GuestUsage g(2, 512 * kMiB, 1ms);
  Script s;
  s.samples = {Sample(0, 1000), Sample(25, 1100), Sample(25, 1100, 200 * kMiB), Sample(125, 1200)};
  ASSERT_DOUBLE_EQ(g.Read(s.probe())->cpu_used_pct, 25.0);
  auto same = g.Read(s.probe());
  ASSERT_TRUE(same.ok());
  EXPECT_DOUBLE_EQ(same->cpu_used_pct, 25.0);
  EXPECT_EQ(same->mem_used_bytes, 200 * kMiB);  // the rest is new
  EXPECT_DOUBLE_EQ(g.Read(s.probe())->cpu_used_pct, 100.0);
}

TEST(MicrovmGuestUsage, HostileAnswersAreRefused) {
  Script s;
  GuestUsage g(2, 512 * kMiB, 1ms);
  // More CPUs or memory than the VM has.
  proto::UsageResult cpus = Sample(0, 10);
  cpus.cpu_count = 3;
  proto::UsageResult mem = Sample(0, 10);
  mem.mem_total_bytes = 513 * kMiB;
  for (const auto& bad : {cpus, mem}) {
    s.samples = {bad};
    auto r = g.Read(s.probe());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kS300);
    EXPECT_NE(r.error().message().find("usage RESULT"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(CheckGuestUsage(Sample(0, 10), 2, 512 * kMiB).ok(), true);
  // A probe's own error passes through.
  s.samples = {Platform("sandbox", "agent sent a malformed usage RESULT (x)")};
  EXPECT_FALSE(g.Read(s.probe()).ok());
}

TEST(MicrovmGuestUsage, CountersThatGoBackAreNoMeasure) {
  GuestUsage g(2, 512 * kMiB, 1ms);
  Script s;
  s.samples = {Sample(0, 1000), Sample(50, 1100), Sample(10, 500), Sample(60, 600)};
  ASSERT_DOUBLE_EQ(g.Read(s.probe())->cpu_used_pct, 50.0);
  auto back = g.Read(s.probe());
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->cpu_used_pct, 0.0);
  // Measured from there again.
  EXPECT_DOUBLE_EQ(g.Read(s.probe())->cpu_used_pct, 50.0);
}

TEST(MicrovmGuestUsage, ABusyShareAboveTheTotalIsClamped) {
  GuestUsage g(2, 512 * kMiB, 1ms);
  Script s;
  // Each sample valid on its own, the deltas not (busy +500, total +100).
  s.samples = {Sample(0, 1000), Sample(500, 1100)};
  auto r = g.Read(s.probe());
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->cpu_used_pct, 100.0);
}

TEST(MicrovmGuestUsage, APausedVmAnswersTheSampleBeforeItsPause) {
  GuestUsage g(2, 512 * kMiB, 1ms);
  Script s;
  auto none = g.Paused("sb");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kS005);
  s.samples = {Sample(100, 1000, 300 * kMiB)};
  ASSERT_TRUE(g.Remember(s.probe()).ok());
  auto p = g.Paused("sb");
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  EXPECT_DOUBLE_EQ(p->cpu_used_pct, 0.0);
  EXPECT_EQ(p->cpu_count, 2u);
  EXPECT_EQ(p->mem_used_bytes, 300 * kMiB);
  EXPECT_EQ(p->disk_used_bytes, 10 * kMiB);
  EXPECT_EQ(s.calls, 1);
  // After the resume the share is measured from that sample: one read.
  s.samples = {Sample(150, 1100)};
  auto after = g.Read(s.probe());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(s.calls, 2);
  EXPECT_DOUBLE_EQ(after->cpu_used_pct, 50.0);
  // A failed sample before a pause leaves the previous one.
  EXPECT_FALSE(g.Remember(s.probe()).ok());
  EXPECT_EQ(g.Paused("sb")->mem_used_bytes, 100 * kMiB);
}

}  // namespace
}  // namespace skiff::microvm
