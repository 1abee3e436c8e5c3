// Starting a VM from a saved migration stream (a shape's template or a
// sandbox's snapshot) and making the copy its own: QEMU loads the stream
// and runs the guest, then the agent is sent a resume HELLO (hello.h) with
// fresh entropy and a forced CRNG reseed, the wall clock and the hostname
// (docs/microvm.md, "Snapshots").
#pragma once

#include <string>

#include "base/error.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {

// Starts QEMU with `spec` (its machine must be the saved one's) loading
// `state_path`, waits for the agent's HELLO after the resume. On failure
// `*killed` says whether the VMM was SIGKILLed from outside (the OOM
// killer, an operator), which says nothing about the stream.
Result<Launched> RestoreVm(const Parts& parts, LaunchSpec spec, const std::string& state_path,
                           const std::string& hostname, bool* killed);

}  // namespace skiff::microvm
