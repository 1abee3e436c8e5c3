// Why the microVM backend does or does not use KVM: the boot probe behind
// KvmUsable()/KvmNote() (microvm.h), run once per host, QEMU and kernel and
// cached, and the wording of the verdict that it logs and `skiff doctor`
// prints (kvm_note).
#pragma once

#include <string>
#include <vector>

namespace skiff::microvm {

// The KVM kernel modules loaded on this host (kvm, kvm_intel, kvm_amd,
// kvm_pvm, ...), from /sys/module and, where present, /proc/modules.
std::vector<std::string> LoadedKvmModules();

// Whether the console output of the probe (the guest kernel booted with no
// root and no initramfs) shows the kernel at the end of its boot: its
// "Kernel panic" for the missing root, or running an init. The banner alone
// is not enough: under kvm_pvm a generic kernel prints it and then stops
// with a KVM internal error.
bool ProbeConsoleShowsBootEnd(const std::string& console);

// The note for a /dev/kvm that opens but did not boot the guest kernel.
// `probe_why` is what the boot probe saw; `modules` the loaded KVM modules.
// When /dev/kvm is served by kvm_pvm (Pagetable-based Virtual Machine, a
// nested KVM that runs only PVM-enabled guest kernels), the note names that
// cause and what would fix it; otherwise it stays generic.
std::string KvmBootFailureNote(const std::string& probe_why, const std::vector<std::string>& modules);

}  // namespace skiff::microvm
