// The agent's answer to op "usage" (agent/system_usage.h): /proc/stat and
// /proc/meminfo parsed, statfs summed over "/" and a separate /tmp, and the
// whole read on this machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "agent/system_usage.h"
#include "support/temp_dir.h"

namespace skiff::agent {
namespace {

constexpr const char* kStat =
    "cpu  100 5 50 1000 20 3 2 7 40 0\n"
    "cpu0 60 5 30 500 10 2 1 4 20 0\n"
    "cpu1 40 0 20 500 10 1 1 3 20 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n"
    "btime 1764892800\n"
    "procs_running 1\n";

TEST(AgentSystemUsage, ProcStatCountsBusyAndTotalTicks) {
  auto t = ParseProcStat(kStat);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(t->cpus, 2u);
  // busy: user + nice + system + irq + softirq (guest is inside user).
  EXPECT_EQ(t->busy, 100u + 5 + 50 + 3 + 2);
  // total: busy + idle + iowait + steal.
  EXPECT_EQ(t->total, t->busy + 1000 + 20 + 7);
}

TEST(AgentSystemUsage, ProcStatOfAnOldKernelWithFewerFields) {
  auto t = ParseProcStat("cpu 10 0 10 80\ncpu0 10 0 10 80\n");
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(t->busy, 20u);
  EXPECT_EQ(t->total, 100u);
}

TEST(AgentSystemUsage, ProcStatRefusesWhatItCannotRead) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4\n").ok());               // no aggregate line
  EXPECT_FALSE(ParseProcStat("cpu 1 2 3 4\nintr 1\n").ok());        // no CPU listed
  EXPECT_FALSE(ParseProcStat("cpu 1 2 x 4\ncpu0 1 2 3 4\n").ok());  // not a number
  EXPECT_FALSE(ParseProcStat("cpu 1 -2 3 4\ncpu0 1 2 3 4\n").ok());
  EXPECT_FALSE(ParseProcStat("cpu 1 2\ncpu0 1 2 3 4\n").ok());                         // too short
  EXPECT_FALSE(ParseProcStat("cpu 18446744073709551615 1 0 0\ncpu0 1 2 3 4\n").ok());  // overflows
  EXPECT_EQ(ParseProcStat("").error().code(), Code::kS300);
}

TEST(AgentSystemUsage, MeminfoUsedIsTotalLessAvailable) {
  auto m = ParseMeminfo(
      "MemTotal:         502000 kB\nMemFree:          300000 kB\nMemAvailable:     400000 kB\n"
      "Buffers:            1000 kB\n");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(m->total_bytes, 502000ull * 1024);
  EXPECT_EQ(m->used_bytes, 102000ull * 1024);
  // An estimate above the total for a moment: nothing used, never negative.
  auto over = ParseMeminfo("MemTotal: 100 kB\nMemAvailable: 101 kB\n");
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->used_bytes, 0u);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 100 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemAvailable: 100 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemTotal: lots kB\nMemAvailable: 1 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemTotal: 18446744073709551615 kB\nMemAvailable: 1 kB\n").ok());
}

TEST(AgentSystemUsage, DiskAddsTmpOnlyWhenItIsItsOwnMount) {
  testing_support::TempDir tmp("usage");
  const std::string& dir = tmp.path();
  auto one = ReadDiskUse(dir, "");
  ASSERT_TRUE(one.ok()) << one.error().ToString();
  EXPECT_GT(one->total_bytes, 0u);
  EXPECT_LE(one->used_bytes, one->total_bytes);
  // A "/tmp" on the same filesystem is not counted twice.
  auto same = ReadDiskUse(dir, dir);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->total_bytes, one->total_bytes);
  // /proc is another filesystem: counted (its size is 0, but it is read).
  auto other = ReadDiskUse(dir, "/proc");
  ASSERT_TRUE(other.ok()) << other.error().ToString();
  EXPECT_FALSE(ReadDiskUse(tmp / "missing", "").ok());
}

TEST(AgentSystemUsage, ThisMachineAnswersAValidResult) {
  auto u = ReadSystemUsage();
  ASSERT_TRUE(u.ok()) << u.error().ToString();
  EXPECT_GE(u->cpu_count, 1u);
  EXPECT_EQ(u->cpu_count, static_cast<uint32_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT(u->mem_total_bytes, 0u);
  EXPECT_GT(u->disk_total_bytes, 0u);
  // What the agent sends is what the host accepts.
  auto back = proto::UsageResult::FromJson(u->ToJson());
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_TRUE(*back == *u);
}

}  // namespace
}  // namespace skiff::agent
