// Guest-side boot for the microVM backend: what skiff-agent does first when
// the guest kernel runs it as /init (PID 1, no --fd).
//
// The initramfs holds only the agent. VmInit() turns the VM into a sandbox:
//
//   /dev (devtmpfs), /proc, /sys           in the initramfs, to find devices
//   /dev/vda  -> /run/lower                the image, read-only (erofs or ext4)
//   tmpfs     -> /run/rw                   the writable layer, dies with the VM
//   overlay   -> /run/root                 lower + rw/upper, the new root
//   /proc, /sys (ro), /dev, /dev/pts, /dev/shm, /tmp (1777) inside it
//   MS_MOVE /run/root onto /, chroot       (an initramfs cannot be pivoted)
//   lo up, hostname
//
// and returns the agent channel: the virtio-serial port named skiff.agent.
// Parameters come from the kernel command line, set by the host:
//   skiff.fstype=erofs|ext4   skiff.hostname=NAME   skiff.tmp_mb=N   skiff.net=user
//
// On any failure it prints the reason to the console and ends the VM, so the
// host sees the VMM exit and reports the console tail (S300 "boot: ...").
#pragma once

#include <cstdint>
#include <string_view>

#include "base/error.h"

namespace skiff::agent {

// True when this process is the guest's init: PID 1 with the initramfs
// marker the microVM backend puts next to /init.
bool IsVmGuestInit();

// Boots the guest as described above and returns the agent channel fd
// (O_RDWR|O_CLOEXEC, blocking). Does not return on failure: it prints
// "skiff-agent: vm init: <reason>" to the console and ends the VM (the
// Result type is kept for callers that treat every error alike).
Result<int> VmInit();

// CLOCK_BOOTTIME in milliseconds when VmInit() had the channel open: the
// guest-side "agent ready" timestamp (time since the guest kernel started).
// -1 when VmInit() has not run (e.g. in the jail).
int64_t VmReadyMillis();

// Sets CLOCK_REALTIME (nanoseconds since the epoch): a guest's clock stands
// still while its vCPUs are stopped, so the host sends its own after an
// in-memory pause (protocol op "clock") and with a resume HELLO.
Status VmSetClock(int64_t realtime_ns);

// A VM restored from a snapshot is a copy of a template guest: same CRNG
// state, a wall clock stopped at the snapshot, the template's hostname.
// VmResume makes it this sandbox's own: mixes `seed` (fresh host entropy,
// >= 32 bytes) into the input pool and forces a CRNG reseed
// (RNDADDENTROPY, RNDRESEEDCRNG), sets CLOCK_REALTIME, sets the hostname
// (empty: unchanged). Any failure is an error: the caller must not serve a
// guest whose random numbers could repeat another sandbox's.
Status VmResume(std::string_view seed, int64_t realtime_ns, std::string_view hostname);

// Ends the VM: syncs, then resets the machine, which the host's VMM (started
// with -no-reboot) treats as exit. The guest kernel has no ACPI, so
// reboot(RB_POWER_OFF) would only halt the CPUs and leave QEMU running until
// the host kills it. For PID 1 after `shutdown` or on a fatal error; never
// returns. `why` (may be empty) goes to the console first.
[[noreturn]] void VmPowerOff(std::string_view why);

}  // namespace skiff::agent
