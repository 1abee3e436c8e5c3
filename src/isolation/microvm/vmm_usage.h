// What a VMM costs the host, measured like Firecracker: CPU time, and
// memory as host RSS minus the guest's RAM. The guest RAM is the one
// anonymous mapping of exactly the guest's size; everything else resident
// is the VMM's own. RSS also counts file pages (QEMU's binary and
// libraries, the kernel, the initramfs) that are page cache shared by every
// VM, so the cost of one more VM is reported separately: the VMM's
// anonymous memory (TCG's translation cache, QEMU's heap), never shared.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace skiff::microvm {

struct VmmUsage {
  int64_t cpu_ms = -1;
  int64_t rss_kib = -1;
  int64_t guest_rss_kib = -1;  // -1: the guest RAM mapping was not found
  int64_t anon_kib = 0;        // Anonymous, all mappings
  int64_t guest_anon_kib = 0;  // the same, guest RAM only
};

// The VMM process's /proc/<pid>/{stat,status,smaps} contents.
struct VmmProcFiles {
  std::string stat, status, smaps;
};

// The usage figures from those files; `guest_bytes` is the guest's RAM size,
// `clk_tck` the kernel's clock ticks per second (sysconf(_SC_CLK_TCK)).
VmmUsage ParseVmmUsage(const VmmProcFiles& proc, uint64_t guest_bytes, long clk_tck);

// The figures of a running VMM, read from its /proc files (a file that
// cannot be read, e.g. of a VMM gone meanwhile, counts as empty).
VmmUsage ReadVmmUsage(pid_t pid, uint64_t guest_bytes);

// Adds the figures to a sandbox's description: vmm_cpu_ms, vmm_rss_kib and,
// when the guest RAM was found, guest_rss_kib, vmm_overhead_kib and
// vmm_private_overhead_kib.
void AddVmmUsage(const VmmUsage& u, nlohmann::json& describe);

}  // namespace skiff::microvm
