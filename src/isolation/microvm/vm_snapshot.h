// A sandbox's VM saved whole (docs/snapshots.md): <dir>/state, the
// migration stream (guest memory holds the writable layer too, so this is
// memory and disk), and <dir>/vm.json, the machine it must be restored
// into and the identities of the host files it depends on. A restore
// refuses a snapshot whose machine, accelerator, QEMU or block image
// differs from what this host would start now.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "isolation/isolator.h"
#include "isolation/microvm/qmp.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {

// The machine a VM was started as.
struct VmShape {
  int cpus = 1;
  uint32_t memory_mb = 0;
  std::string block_image;
  bool kvm = false;
  std::string append;
  // With a NIC (network: true): a restore gets a network of its own, made
  // for the restoring sandbox's policy, behind the same guest address.
  bool network = false;
};

// Saves the VM behind `qmp` into `dir` (see above). `was_paused`: its
// vCPUs are stopped and stay so; otherwise they run again after the save.
Result<SnapshotContents> SaveVmSnapshot(Qmp& qmp, const VmShape& shape, const Parts& parts,
                                        const std::string& dir, uint64_t max_bytes, bool was_paused);

// The launch of a VM restoring `dir` for `policy` on this host (whose
// accelerator is `kvm`), or S300 naming what no longer matches. A VM saved
// with network: true restores only for a policy with network: true (its
// launch then makes that sandbox's network, `policy` outliving the
// launch), and one saved without only for a policy without.
Result<LaunchSpec> RestoreSpec(const std::string& dir, const SandboxPolicy& policy, const Parts& parts,
                               bool kvm);

}  // namespace skiff::microvm
