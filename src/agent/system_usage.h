// The agent's answer to op "usage" (protocol/messages.h UsageResult): the
// counters of the system it runs in, read from its own /proc and statfs.
// In a microVM that is the guest (the host's sandbox::metrics); in a jail
// /proc/stat and /proc/meminfo are the host's (the jail's metrics come from
// its cgroups on the host side instead).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "protocol/messages.h"

namespace skiff::agent {

struct CpuTicks {
  uint32_t cpus = 0;   // "cpuN" lines
  uint64_t busy = 0;   // user + nice + system + irq + softirq
  uint64_t total = 0;  // busy + idle + iowait + steal
};
// Parses /proc/stat: the aggregate "cpu" line and the per-CPU lines. S300
// when there is no aggregate line, a field is not a number or no CPU is
// listed.
Result<CpuTicks> ParseProcStat(std::string_view text);

struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;  // MemTotal - MemAvailable
};
// Parses /proc/meminfo (MemTotal and MemAvailable, in kB). S300 when either
// is missing or not a number.
Result<MemInfo> ParseMeminfo(std::string_view text);

// Used and total bytes of the filesystems at `root` and at `tmp` (the
// latter only when it is a mount of its own, another device than `root`).
struct DiskUse {
  uint64_t used_bytes = 0;
  uint64_t total_bytes = 0;
};
Result<DiskUse> ReadDiskUse(const std::string& root, const std::string& tmp);

// All of it, for this system ("/proc/stat", "/proc/meminfo", "/" and "/tmp").
Result<proto::UsageResult> ReadSystemUsage();

}  // namespace skiff::agent
