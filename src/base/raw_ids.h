// Switching a freshly cloned child's groups, gid and uid with raw system
// calls, for the children that run between clone and exec (the jail's init,
// the VMM launcher, the agent's spawned processes).
//
// Not libc's setgroups/setresgid/setresuid: those change the ids of every
// thread of the process (glibc's setxid broadcast), and a child of a raw
// clone/clone3 of a multi-threaded parent still carries the parent's thread
// list, so the broadcast waits forever for threads that are not there (seen:
// a VMM launch hung in futex_wait). The child has one thread; the raw calls
// change exactly that. Async-signal-safe: no allocation, no locks.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace skiff {

// Sets the supplementary groups, then the real/effective/saved gid, then
// uid. Returns nullptr, or the name of the call that failed (errno set).
inline const char* SetIdsRaw(const gid_t* groups, size_t n_groups, gid_t gid, uid_t uid) noexcept {
  if (::syscall(SYS_setgroups, n_groups, groups) != 0) return "setgroups";
  if (::syscall(SYS_setresgid, gid, gid, gid) != 0) return "setresgid";
  if (::syscall(SYS_setresuid, uid, uid, uid) != 0) return "setresuid";
  return nullptr;
}

}  // namespace skiff
