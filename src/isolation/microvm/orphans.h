// VMs left by a daemon that died: every VM carries its launcher's owner tag
// "pid:starttime" (in its state directory's owner file and in the VMM's
// environment), and a cleanup kills VMMs and removes state directories
// whose tag names a process that is gone.
#pragma once

#include <string>
#include <string_view>

namespace skiff::microvm {

inline constexpr const char* kOwnerFile = "owner";          // in a VM's state directory
inline constexpr const char* kOwnerEnv = "SKIFF_VM_OWNER";  // in the VMM's environment

// This process's tag.
std::string SelfOwnerTag();

// The name a VM's state directory has while it is being created, before its
// owner file is in it and it is renamed to the VM's id: the owner tag is in
// the name, so a cleanup can tell a directory abandoned by a dead creator
// from one being created right now without waiting.
std::string CreatingDirName(const std::string& owner_tag, const std::string& id);
// The name it has while being removed: renamed first, so a process killed
// half-way through (the owner file already gone) leaves a directory whose
// name still says whose it was.
std::string RemovingDirName(const std::string& owner_tag, const std::string& id);
// The owner tag in a `.creating-` or `.removing-` name; empty for any other.
std::string OwnerFromDirName(std::string_view name);

// True when `tag` names no living process: malformed, or its pid is gone or
// now belongs to a process started at another time.
bool OwnerGone(const std::string& tag);

// The kOwnerEnv value in a /proc/<pid>/environ image (NUL-separated), or "".
std::string OwnerTagFromEnviron(std::string_view environ);

// Kills the VMMs (any process whose environment carries kOwnerEnv) whose
// owner is gone.
void KillOrphanVmms();

// Removes the state directories under `state_root` whose owner is gone
// (from the owner file, or from the name of one being created), or that have
// had no owner file for `abandoned_after_s` seconds (left by an older skiff;
// a younger one may be being created right now by one).
void RemoveStaleStateDirs(const std::string& state_root, int abandoned_after_s = 60);

// Both: what a daemon does at start for VMs left by one that died.
void CleanupOrphanVms(const std::string& state_root);

}  // namespace skiff::microvm
