// What sandboxes of a crashed skiff process leave behind (their processes,
// cgroups, state directories and lock files), and its removal. A sandbox is
// an orphan when nobody holds its liveness lock; a uid range is orphaned
// when nobody holds its slot lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "isolation/jail/uid_slots.h"

namespace skiff::jail {

// <lock_dir>/live-<id>.lock: flock'd by the process running sandbox <id>,
// and holding the path of that sandbox's state directory, which lies in
// the runtime directory of whichever skiff started it.
std::string LiveLockPath(const std::string& lock_dir, const std::string& id);

// Writes `state_dir` into the liveness lock `fd` (held by the caller).
Status RecordStateDir(int fd, const std::string& state_dir);

// The state directory recorded in the liveness lock of sandbox `id`, if it
// is one a sandbox of that id could have had (<absolute>/sandboxes/<id>);
// else empty.
std::string RecordedStateDir(const std::string& lock_path, const std::string& id);

struct OrphanScope {
  uint32_t uid_base = 0;  // the isolator's uid ranges
  uint32_t slots = 0;
  UidSlots* uid_slots = nullptr;          // slots held by this process are never touched
  std::string lock_dir;                   // <host runtime>/jail: shared by every skiff
  std::vector<std::string> cgroup_bases;  // the skiff/ cgroup directories
  std::string sandboxes_dir;              // <runtime>/sandboxes: for a lock that records none
};

// Kills processes running in a uid range whose slot nobody holds, and
// removes the cgroups, state directories and liveness locks of sandboxes
// whose liveness lock nobody holds.
void CleanupOrphans(const OrphanScope& scope);

}  // namespace skiff::jail
