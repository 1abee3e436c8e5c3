#include "isolation/microvm/kernel_cmdline.h"

#include <cstdlib>

#include "base/file_io.h"
#include "isolation/microvm/microvm.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {
namespace {

// Measured under TCG (docs/microvm.md): console on the 8250, no i8042,
// trust the TSC, fixed loops-per-jiffy; reboot=t and panic=-1 turn any
// guest failure into a reset, which -no-reboot makes QEMU exit on.
constexpr const char* kBootArgs =
    "console=ttyS0 quiet panic=-1 reboot=t i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
    "tsc=reliable no_timer_check lpj=5000000";

// Only under TCG (docs/microvm.md, "Boot under TCG"):
// - tsc_early_khz: the host's TSC rate, so a busy host cannot fail the
//   guest's TSC calibration (added with the rate, below);
// - noapictimer: the PIT drives the tick instead of a local APIC timer the
//   kernel would first calibrate for 100 ms of guest time (200-300 ms of
//   wall time emulated);
// - norandmaps: no address-space randomisation inside the guest. TCG caches
//   translated code by virtual address, so with randomisation every new
//   process translated ld.so and libc again: a dynamically linked
//   /bin/true took 30-50 ms, without it 8 ms. The VM boundary does not
//   depend on it; under KVM randomisation stays on.
constexpr const char* kTcgBootArgs = " noapictimer norandmaps";

}  // namespace

std::string GuestHostname(const std::string& name) {
  std::string h;
  for (char c : name)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.')
      h += c;
  return h.size() <= 63 ? h : std::string();
}

uint64_t HostTscKhz() {
  static const uint64_t khz = [] {
    Result<std::string> r = ReadFile("/proc/cpuinfo");
    if (!r.ok()) return uint64_t{0};
    const std::string& cpuinfo = *r;
    auto flags = cpuinfo.find("\nflags");
    if (flags == std::string::npos) return uint64_t{0};
    std::string line = cpuinfo.substr(flags, cpuinfo.find('\n', flags + 1) - flags) + " ";
    // Only a constant-rate TSC is a clock worth trusting.
    if (line.find(" constant_tsc ") == std::string::npos) return uint64_t{0};
    auto mhz = cpuinfo.find("cpu MHz");
    if (mhz == std::string::npos) return uint64_t{0};
    auto colon = cpuinfo.find(':', mhz);
    if (colon == std::string::npos) return uint64_t{0};
    double v = std::atof(cpuinfo.c_str() + colon + 1);
    return v > 100 && v < 10000 ? static_cast<uint64_t>(v * 1000) : uint64_t{0};
  }();
  return khz;
}

std::string KernelCmdline(const SandboxPolicy& policy, bool kvm) {
  std::string fstype = policy.rootfs.block_fstype.empty() ? "erofs" : policy.rootfs.block_fstype;
  std::string out = std::string(kBootArgs) + " skiff.fstype=" + fstype;
  // SKIFF_MICROVM_DEBUG=1: the whole kernel log on the console.
  if (Env("SKIFF_MICROVM_DEBUG") == "1") out.replace(out.find(" quiet"), 6, "");
  if (!kvm) {
    out += kTcgBootArgs;
    if (uint64_t khz = HostTscKhz()) out += " tsc_early_khz=" + std::to_string(khz);
  }
  // The guest re-checks these; only plain tokens are passed.
  if (std::string h = GuestHostname(policy.hostname); !h.empty()) out += " skiff.hostname=" + h;
  if (policy.tmp_size_mb > 0) out += " skiff.tmp_mb=" + std::to_string(policy.tmp_size_mb);
  if (policy.network) out += " skiff.net=user";
  return out;
}

}  // namespace skiff::microvm
