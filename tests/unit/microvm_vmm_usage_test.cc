// VMM accounting from /proc text: CPU time, RSS, and the guest RAM mapping
// told apart from the VMM's own memory.
#include <gtest/gtest.h>

#include "isolation/microvm/vmm_usage.h"

namespace skiff::microvm {
namespace {

// Fields 14 (utime) and 15 (stime) are 150 and 50 ticks; the command name
// holds a space and a ')' to check the parse starts after the last one.
constexpr const char* kStat =
    "4242 (qemu (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 1 0 0";
constexpr const char* kStatus = "Name:\tqemu\nVmPeak:\t 999 kB\nVmRSS:\t  70000 kB\nThreads:\t3\n";
// A 128 MiB mapping (the guest), then another of the same size (not the
// guest: only the first counts), then a small heap.
constexpr const char* kSmaps =
    "7f0000000000-7f0008000000 rw-p 00000000 00:00 0 \n"
    "Size:             131072 kB\n"
    "Rss:               40000 kB\n"
    "Anonymous:         39000 kB\n"
    "7f1000000000-7f1008000000 rw-p 00000000 00:00 0 \n"
    "Rss:                1000 kB\n"
    "Anonymous:           900 kB\n"
    "55d000000000-55d000100000 rw-p 00000000 00:00 0   [heap]\n"
    "Rss:                 800 kB\n"
    "Anonymous:           700 kB\n";

constexpr uint64_t kGuest = 128ull << 20;

TEST(ParseVmmUsage, ReadsCpuRssAndTheGuestMapping) {
  VmmUsage u = ParseVmmUsage({kStat, kStatus, kSmaps}, kGuest, 100);
  EXPECT_EQ(u.cpu_ms, 2000);  // (150 + 50) ticks at 100 Hz
  EXPECT_EQ(u.rss_kib, 70000);
  EXPECT_EQ(u.guest_rss_kib, 40000);
  EXPECT_EQ(u.guest_anon_kib, 39000);
  EXPECT_EQ(u.anon_kib, 39000 + 900 + 700);
}

TEST(ParseVmmUsage, NoMappingOfTheGuestSize) {
  VmmUsage u = ParseVmmUsage({kStat, kStatus, kSmaps}, kGuest * 2, 100);
  EXPECT_EQ(u.guest_rss_kib, -1);
  EXPECT_EQ(u.guest_anon_kib, 0);
  EXPECT_EQ(u.anon_kib, 39000 + 900 + 700);
}

TEST(ParseVmmUsage, MissingFilesLeaveUnknowns) {
  VmmUsage u = ParseVmmUsage({}, kGuest, 100);
  EXPECT_EQ(u.cpu_ms, -1);
  EXPECT_EQ(u.rss_kib, -1);
  EXPECT_EQ(u.guest_rss_kib, -1);
  EXPECT_EQ(u.anon_kib, 0);
  EXPECT_EQ(ParseVmmUsage({kStat, "", ""}, kGuest, 0).cpu_ms, -1);
}

}  // namespace
}  // namespace skiff::microvm
