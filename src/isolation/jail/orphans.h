// What sandboxes of a crashed skiff process leave behind (their processes,
// cgroups, state directories and lock files), and its removal. A sandbox is
// an orphan when nobody holds its liveness lock; a uid range is orphaned
// when nobody holds its slot lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isolation/jail/uid_slots.h"

namespace skiff::jail {

// <lock_dir>/live-<id>.lock: flock'd by the process running sandbox <id>.
std::string LiveLockPath(const std::string& lock_dir, const std::string& id);

struct OrphanScope {
  uint32_t uid_base = 0;  // the isolator's uid ranges
  uint32_t slots = 0;
  UidSlots* uid_slots = nullptr;          // slots held by this process are never touched
  std::string lock_dir;                   // <runtime>/jail
  std::vector<std::string> cgroup_bases;  // the skiff/ cgroup directories
  std::string sandboxes_dir;              // <runtime>/sandboxes
};

// Kills processes running in a uid range whose slot nobody holds, and
// removes the cgroups, state directories and liveness locks of sandboxes
// whose liveness lock nobody holds.
void CleanupOrphans(const OrphanScope& scope);

}  // namespace skiff::jail
