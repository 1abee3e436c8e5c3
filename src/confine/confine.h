// Child confinement: what every process started inside a sandbox gets.
//
//   auto policy = confine::BuildChildPolicy();   // once, in the parent
//   ... fork() ...
//   auto r = confine::ApplyInChild(*policy);      // in the child, before execve
//
// ApplyInChild is async-signal-safe (raw syscalls only, no allocation), so it
// may run between fork() and execve() of a multi-threaded parent.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>

#include <cstdint>
#include <vector>

#include "base/error.h"

namespace skiff::confine {

// Docker's default capability set.
uint64_t DefaultCapabilityMask();

struct ChildPolicy {
  // Capabilities kept in the bounding, effective, permitted and inheritable
  // sets (bit N = capability N). Every other one is dropped.
  uint64_t keep_caps = 0;
  // Highest capability number the running kernel knows.
  int last_cap = 40;
  // Seccomp deny list (EPERM), exported once from libseccomp.
  std::vector<sock_filter> filter;
  // RLIMIT_NOFILE soft and hard ceiling (lowered only, never raised).
  rlim_t nofile = 65536;
  // Set by ApplyToParent: the inherited parts are in place in the parent,
  // and the capability sets a child must end with are precomputed.
  bool parent_applied = false;
  // effective, permitted, inheritable; [0] caps 0-31, [1] caps 32-63.
  uint32_t child_caps[3][2] = {};
};

// Builds the policy. Fails (S300) when libseccomp cannot build the filter.
Result<ChildPolicy> BuildChildPolicy();

struct ApplyResult {
  int err = 0;                 // 0 on success, else the errno of the failed step
  const char* step = nullptr;  // static string naming the failed step
  bool ok() const { return err == 0; }
};

// Applies the policy to the calling process: rlimits (core 0, nofile),
// capability bounding set, ambient/inheritable/permitted/effective sets,
// PR_SET_NO_NEW_PRIVS, then the seccomp filter. Async-signal-safe.
// After ApplyToParent in the parent, only what a child cannot inherit is
// done: RLIMIT_NOFILE, the capability sets (one capset) and the filter.
ApplyResult ApplyInChild(const ChildPolicy& policy) noexcept;

// For a parent that starts many children (the agent): applies to itself
// the parts of the policy that children inherit and that do not limit the
// parent's own work — RLIMIT_CORE 0, the capability bounding set, an empty
// ambient set, PR_SET_NO_NEW_PRIVS (it never executes another program) —
// and precomputes the children's capability sets from its own. Its own
// effective capabilities and system calls stay as they are. Saves each
// child some 70 system calls (about 1 ms per exec under TCG emulation).
ApplyResult ApplyToParent(ChildPolicy& policy) noexcept;

// The syscalls the filter denies (for docs and tests).
const std::vector<const char*>& DeniedSyscalls();

}  // namespace skiff::confine
