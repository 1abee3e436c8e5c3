// The microVM backend: one QEMU `microvm` machine per sandbox (KVM when
// /dev/kvm opens read-write, TCG emulation otherwise; the same code path),
// booting the project's guest kernel with skiff-agent as /init.
//
// Host side of one VM:
//   - the image's read-only block image as virtio-blk (opened here, handed
//     to QEMU as an fd; every VM of an image shares the file);
//   - the agent channel: a socketpair, one end passed to QEMU as the
//     chardev of a virtio-serial port named skiff.agent;
//   - the serial console into <state>/console.log (ExitReport's tail);
//   - no NIC unless policy.network (then QEMU user-mode networking).
// QEMU itself is confined: new mount/pid/ipc/uts (and without network: net)
// namespaces, a root holding only /usr, the kernel and the initramfs, an
// unprivileged per-VM uid, no_new_privs, and `-sandbox on,...`.
//
// Per-VM state lives in <RuntimeDir>/microvm/<sandbox id>/ and is removed by
// Stop(); CleanupOrphans() kills VMs whose launching process is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "isolation/isolator.h"

namespace skiff {

std::unique_ptr<Isolator> MakeMicrovmIsolator();

namespace microvm {

// Where the backend finds its parts; each can be overridden by environment:
//   SKIFF_QEMU    the qemu-system-x86_64 binary (default: from PATH)
//   SKIFF_KERNEL  the guest kernel (default: <CacheDir>/kernel/current/vmlinux,
//                 built by scripts/build-kernel)
std::string QemuBinary();
std::string KernelPath();
// True when /dev/kvm opens read-write and a guest kernel actually boots
// under it (probed once per host/QEMU/kernel and cached). SKIFF_MICROVM_ACCEL
// = tcg | kvm overrides the probe.
bool KvmUsable();
// Why KVM is not used (empty when it is).
std::string KvmNote();
// The kernel command line for a policy (tuned for fast boot under emulation).
std::string KernelCmdline(const SandboxPolicy& policy, bool kvm);
// The host's TSC frequency in kHz (0 if unknown). Under TCG the guest reads
// the host's TSC, and its own calibration fails on a busy host, leaving the
// guest clock stopped; the guest is told the frequency instead.
uint64_t HostTscKhz();

}  // namespace microvm
}  // namespace skiff
