#include "agent/system_usage.h"

#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <vector>

#include "base/file_io.h"

namespace skiff::agent {
namespace {

// The whitespace-separated words of `line`.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) i++;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') j++;
    if (j > i) w.push_back(line.substr(i, j - i));
    i = j;
  }
  return w;
}

bool ToU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Calls `fn` with each line of `text`.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    fn(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

bool AddChecked(uint64_t* sum, uint64_t v) { return !__builtin_add_overflow(*sum, v, sum); }

}  // namespace

Result<CpuTicks> ParseProcStat(std::string_view text) {
  CpuTicks t;
  bool aggregate = false;
  std::string bad;
  ForEachLine(text, [&](std::string_view line) {
    if (!bad.empty() || line.substr(0, 3) != "cpu") return;
    std::vector<std::string_view> w = Words(line);
    if (w.empty()) return;
    if (w[0] != "cpu") {
      // "cpuN": one online CPU.
      if (w[0].size() > 3 && w[0].find_first_not_of("0123456789", 3) == std::string_view::npos) t.cpus++;
      return;
    }
    // cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user and nice.
    if (w.size() < 5) {
      bad = "a short cpu line";
      return;
    }
    uint64_t v[8] = {};
    for (size_t i = 1; i < w.size() && i <= 8; i++)
      if (!ToU64(w[i], &v[i - 1])) {
        bad = "cpu field " + std::to_string(i) + " is not a number";
        return;
      }
    const uint64_t busy_parts[] = {v[0], v[1], v[2], v[5], v[6]};
    const uint64_t idle_parts[] = {v[3], v[4], v[7]};
    for (uint64_t p : busy_parts)
      if (!AddChecked(&t.busy, p)) bad = "cpu ticks overflow";
    t.total = t.busy;
    for (uint64_t p : idle_parts)
      if (!AddChecked(&t.total, p)) bad = "cpu ticks overflow";
    aggregate = true;
  });
  if (!bad.empty()) return Platform("usage", "/proc/stat: " + bad);
  if (!aggregate) return Platform("usage", "/proc/stat: no cpu line");
  if (t.cpus == 0) return Platform("usage", "/proc/stat: no cpuN line");
  return t;
}

Result<MemInfo> ParseMeminfo(std::string_view text) {
  uint64_t total_kb = 0, available_kb = 0;
  bool has_total = false, has_available = false;
  bool bad = false;
  ForEachLine(text, [&](std::string_view line) {
    std::vector<std::string_view> w = Words(line);
    if (w.size() < 2) return;
    if (w[0] == "MemTotal:") {
      has_total = true;
      bad |= !ToU64(w[1], &total_kb);
    } else if (w[0] == "MemAvailable:") {
      has_available = true;
      bad |= !ToU64(w[1], &available_kb);
    }
  });
  if (bad) return Platform("usage", "/proc/meminfo: MemTotal or MemAvailable is not a number");
  if (!has_total || !has_available) return Platform("usage", "/proc/meminfo: no MemTotal or MemAvailable");
  if (total_kb > (uint64_t{1} << 50)) return Platform("usage", "/proc/meminfo: MemTotal out of range");
  MemInfo m;
  m.total_bytes = total_kb * 1024;
  // MemAvailable may exceed MemTotal for a moment (it is an estimate).
  m.used_bytes = available_kb >= total_kb ? 0 : (total_kb - available_kb) * 1024;
  return m;
}

Result<DiskUse> ReadDiskUse(const std::string& root, const std::string& tmp) {
  struct stat root_st {};
  if (::stat(root.c_str(), &root_st) != 0) return Error::Sys(Code::kS300, "stat", root, errno);
  std::vector<std::string> paths = {root};
  struct stat tmp_st {};
  if (!tmp.empty() && ::stat(tmp.c_str(), &tmp_st) == 0 && tmp_st.st_dev != root_st.st_dev)
    paths.push_back(tmp);
  DiskUse d;
  for (const std::string& p : paths) {
    struct statfs sf {};
    if (::statfs(p.c_str(), &sf) != 0) return Error::Sys(Code::kS300, "statfs", p, errno);
    const auto frsize = static_cast<uint64_t>(sf.f_frsize);
    const auto blocks = static_cast<uint64_t>(sf.f_blocks);
    const auto free_blocks = std::min(static_cast<uint64_t>(sf.f_bfree), blocks);
    d.total_bytes += blocks * frsize;
    d.used_bytes += (blocks - free_blocks) * frsize;
  }
  return d;
}

Result<proto::UsageResult> ReadSystemUsage() {
  SKIFF_ASSIGN_OR_RETURN(std::string stat, ReadFile("/proc/stat", size_t{4} << 20));
  SKIFF_ASSIGN_OR_RETURN(CpuTicks cpu, ParseProcStat(stat));
  SKIFF_ASSIGN_OR_RETURN(std::string meminfo, ReadFile("/proc/meminfo", size_t{1} << 20));
  SKIFF_ASSIGN_OR_RETURN(MemInfo mem, ParseMeminfo(meminfo));
  SKIFF_ASSIGN_OR_RETURN(DiskUse disk, ReadDiskUse("/", "/tmp"));
  proto::UsageResult r;
  r.cpu_count = std::min<uint32_t>(cpu.cpus, proto::kMaxUsageCpus);
  r.cpu_busy_ticks = std::min(cpu.busy, proto::kMaxUsageTicks);
  r.cpu_total_ticks = std::min(cpu.total, proto::kMaxUsageTicks);
  r.mem_total_bytes = std::min(mem.total_bytes, proto::kMaxUsageBytes);
  r.mem_used_bytes = std::min(mem.used_bytes, r.mem_total_bytes);
  r.disk_total_bytes = std::min(disk.total_bytes, proto::kMaxUsageBytes);
  r.disk_used_bytes = std::min(disk.used_bytes, r.disk_total_bytes);
  return r;
}

}  // namespace skiff::agent
