// Snapshot templates: the first VM of a shape (image, vCPUs, memory, /tmp
// size, kernel, agent, QEMU, accelerator) boots a template with no
// sandbox-specific state, stops it once its agent is ready and saves it as a
// QEMU migration stream (template_store.h keeps it). Later VMs of that shape
// start QEMU with `-incoming` from that file instead of booting, and the
// restored agent is then given what must differ per sandbox
// (docs/microvm.md, "Snapshots"): fresh entropy and a forced CRNG reseed, the
// wall clock, the hostname.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/error.h"
#include "isolation/isolator.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {

// A host file's identity: its path, device, inode, size and mtime; "" when
// it cannot be read. Changes when the file is replaced or rewritten.
std::string FileIdentity(const std::string& path);

// SKIFF_MICROVM_SNAPSHOT=0 turns templates off.
bool SnapshotsEnabled();
// <CacheDir>/microvm/snapshots.
std::string SnapshotRoot();

// The template's policy: the sandbox's shape without its identity.
SandboxPolicy TemplatePolicy(const SandboxPolicy& p);

// The key of a template for `spec` (its kernel command line included), from
// the identities of the parts and of the host; "" when any part cannot be
// identified (then no snapshot is used).
std::string SnapshotKey(const Parts& parts, const std::string& block_image, const LaunchSpec& spec);

// A VM of `policy` restored from its shape's template (built first when
// there is none), or nullopt when the shape takes no template or its
// template failed: then the caller boots. *template_ms is the build time
// when this call built one, otherwise -1. A shape whose template could not
// be built or restored boots from then on in this process, instead of
// failing twice per create.
std::optional<Launched> RestoreFromTemplate(const Parts& parts, const LaunchSpec& spec,
                                            const SandboxPolicy& policy, int64_t* template_ms);

}  // namespace skiff::microvm
