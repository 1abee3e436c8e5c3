// The QEMU command line of one microVM, as a pure function of a value that
// describes the VM: no files, descriptors or environment are read here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace skiff::microvm {

// The guest-visible machine: everything a snapshot must be restored into
// unchanged (part of the template key).
struct QemuMachine {
  std::string append;  // kernel command line
  int cpus = 1;
  uint32_t memory_mb = 0;
  bool kvm = false;  // -accel kvm -cpu host; otherwise TCG
};

// One VMM: the machine plus what is attached to it. Descriptor numbers are
// those QEMU sees: the agent channel is always 3 and the block image 4; the
// optional ones are -1 when absent. The kernel and initramfs are at
// /vm/kernel and /vm/initrd in the VMM's root.
struct QemuCommand {
  std::string exec_path;  // argv[0]
  std::string id;         // sandbox id (its first 8 characters name the process)
  QemuMachine machine;
  int tap_fd = -1;       // network: the guest's tap (no NIC without it)
  int qmp_fd = -1;       // a QMP monitor (templates and restores)
  int incoming_fd = -1;  // restore from this migration stream (-incoming)
};

std::vector<std::string> MachineArgs(const QemuMachine& m);
std::vector<std::string> QemuArgv(const QemuCommand& c);

}  // namespace skiff::microvm
