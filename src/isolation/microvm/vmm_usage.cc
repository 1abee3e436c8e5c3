#include "isolation/microvm/vmm_usage.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/file_io.h"

namespace skiff::microvm {
namespace {

// "7f12a000-7f12b000 rw-p 00000000 00:00 0   [path]": a mapping header, as
// opposed to a "Key:   value kB" line.
bool SmapsHeader(const std::string& line, uint64_t* size) {
  auto sp = line.find(' ');
  auto dash = line.find('-');
  if (sp == std::string::npos || dash == std::string::npos || dash > sp) return false;
  if (line.find(':') < sp) return false;
  unsigned long long lo = 0, hi = 0;
  if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) != 2 || hi < lo) return false;
  *size = hi - lo;
  return true;
}

}  // namespace

VmmUsage ParseVmmUsage(const VmmProcFiles& proc, uint64_t guest_bytes, long clk_tck) {
  VmmUsage u;
  const std::string& stat = proc.stat;
  auto rp = stat.rfind(')');
  if (rp != std::string::npos) {
    std::istringstream in(stat.substr(rp + 2));
    std::string f;
    int64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> f; i++) {
      if (i == 14) utime = std::atoll(f.c_str());
      if (i == 15) stime = std::atoll(f.c_str());
    }
    if (clk_tck > 0) u.cpu_ms = (utime + stime) * 1000 / clk_tck;
  }
  std::istringstream status(proc.status);
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::atoll(line.c_str() + 6);
  std::istringstream smaps(proc.smaps);
  bool in_guest = false, found = false;
  int64_t guest_rss = 0;
  for (std::string line; std::getline(smaps, line);) {
    uint64_t size = 0;
    if (SmapsHeader(line, &size)) {
      // Only the first mapping of exactly the guest's size: QEMU's RAM block.
      in_guest = !found && size == guest_bytes;
      found = found || in_guest;
      continue;
    }
    int64_t kib = line.rfind("Anonymous:", 0) == 0 ? std::atoll(line.c_str() + 10) : 0;
    u.anon_kib += kib;
    if (in_guest) {
      u.guest_anon_kib += kib;
      if (line.rfind("Rss:", 0) == 0) guest_rss += std::atoll(line.c_str() + 4);
    }
  }
  if (found) u.guest_rss_kib = guest_rss;
  return u;
}

VmmUsage ReadVmmUsage(pid_t pid, uint64_t guest_bytes) {
  auto read = [](const std::string& path) {
    Result<std::string> r = ReadFile(path);
    return r.ok() ? std::move(*r) : std::string();
  };
  std::string base = "/proc/" + std::to_string(pid);
  return ParseVmmUsage({read(base + "/stat"), read(base + "/status"), read(base + "/smaps")}, guest_bytes,
                       ::sysconf(_SC_CLK_TCK));
}

void AddVmmUsage(const VmmUsage& u, nlohmann::json& d) {
  d["vmm_cpu_ms"] = u.cpu_ms;
  d["vmm_rss_kib"] = u.rss_kib;
  if (u.guest_rss_kib >= 0 && u.rss_kib >= 0) {
    d["guest_rss_kib"] = u.guest_rss_kib;
    d["vmm_overhead_kib"] = u.rss_kib - u.guest_rss_kib;
    d["vmm_private_overhead_kib"] = u.anon_kib - u.guest_anon_kib;
  }
}

}  // namespace skiff::microvm
