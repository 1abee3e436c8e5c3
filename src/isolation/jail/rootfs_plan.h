// The sandbox's filesystem plan: which overlays the init mounts, in what
// order, from which lower trees, and the options of its tmpfs mounts. A
// pure value computed from the policy (no system calls), so it can be
// checked without root; Start attaches the idmapped trees and hands the
// plan to the init (child.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isolation/isolator.h"

namespace skiff::jail {

struct OverlayPlan {
  // All relative to the per-sandbox tmpfs mounted on the state directory.
  std::string mountpoint;  // "root" for "/", "root/usr" for "/usr"
  std::string upper;       // "u<i>"
  std::string work;        // "w<i>"
  // Host directories (first = top) and the names their idmapped copies are
  // attached at ("l<i>.<j>").
  std::vector<std::string> lower_hosts;
  std::vector<std::string> lower_names;
  std::string options;  // "lowerdir=l0.0:l0.1,upperdir=u0,workdir=w0"
};

struct RootfsPlan {
  std::vector<OverlayPlan> overlays;  // mounted in this order; "/" first
  uint64_t tmp_mb = 0;                // /tmp and /dev/shm size
  std::string state_opts;             // the per-sandbox tmpfs (writable layers)
  std::string dev_opts;               // /dev
  std::string shm_opts;               // /dev/shm
  std::string tmp_opts;               // /tmp
};

// `policy` has been validated (its layers are clean absolute paths, "/"
// first); `uid_base` owns the sandbox's tmpfs roots; `upper_size_mb` 0 means
// memory_mb.
RootfsPlan PlanRootfs(const SandboxPolicy& policy, uint32_t uid_base, uint64_t upper_size_mb);

}  // namespace skiff::jail
