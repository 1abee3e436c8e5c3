// Saving a VM's state with QEMU's migration stream: to a file the VMM may
// write (a template, whose VMM runs no user code), or through a pipe the
// host drains into a file of its own (a sandbox's VM, whose file size limit
// stays at its logs' cap; the host enforces the snapshot's size instead).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "isolation/microvm/qmp.h"

namespace skiff::microvm {

// Streams the (stopped) VM's state into `fd`; returns when QEMU reports the
// migration completed. QEMU's bandwidth limit (meant for networks) is lifted.
Status MigrateToFd(Qmp& qmp, int fd, Qmp::Deadline deadline);

// Saves a sandbox's VM into `path` (created 0600, must not exist), at most
// `max_bytes` (S400 beyond, the file removed). The vCPUs are stopped for
// the save and run again afterwards unless `was_paused`. *bytes gets the
// size written.
Status SaveVmState(Qmp& qmp, const std::string& path, uint64_t max_bytes, bool was_paused,
                   Qmp::Deadline deadline, uint64_t* bytes);

}  // namespace skiff::microvm
