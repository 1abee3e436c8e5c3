// The code that runs in the sandbox's init between clone() and execveat()
// of skiff-agent. The child shares the parent's memory (CLONE_VM|CLONE_VFORK,
// the posix_spawn technique: no page-table copy, and the parent sleeps until
// the exec), and the parent is multi-threaded, so everything here is
// async-signal-safe: raw system calls on data prepared by the parent before
// the clone, no allocation, no locks, no stdio, and no writes to memory other
// than the child's own stack and the `report` slot.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace skiff {
struct ChildFailure;
}
namespace skiff::confine {
struct ChildPolicy;
}

namespace skiff::jail {

// One overlay mount inside the sandbox. All paths are relative to the
// per-sandbox tmpfs the child mounts on the state directory.
struct ChildLayer {
  const char* mountpoint = nullptr;  // "root" or "root/usr"
  const char* options = nullptr;     // "lowerdir=l0.0,upperdir=u0,workdir=w0"
  const char* upper = nullptr;
  const char* work = nullptr;
  int n_lower = 0;
  const int* lower_fds = nullptr;           // detached idmapped mounts
  const char* const* lower_dirs = nullptr;  // where to attach them
};

inline constexpr int kMaxCgroupBases = 8;

struct ChildPlan {
  int sock_fd = -1;         // becomes fd 3 of the agent
  int launcher_pidfd = -1;  // LauncherPidfd() (launcher_tie.h)
  // When >= 0: the host's window into the sandbox's writable state (for
  // snapshots), sent over this socket as O_PATH descriptors, one per
  // message: 's' the per-sandbox tmpfs (the overlays' upper directories),
  // 't' the sandbox's /tmp, 'm' its /dev/shm. Closed by the child before
  // the exec.
  int state_sock = -1;
  int agent_fd = -1;                  // O_PATH fd of the agent binary (execveat)
  ChildFailure* report = nullptr;     // parent memory (CLONE_VM): filled on failure
  int userns_fd = -1;                 // the sandbox's user namespace (already mapped)
  int netns_fd = -1;                  // network: true: the host-owned network namespace to join
  const char* resolv_conf = nullptr;  // network: true: /etc/resolv.conf content
  // The sandbox's cgroups: <base>/<cgroup_procs> for each base (the skiff/
  // directories, opened before the mounts change), each to write "0" into
  // once *cgroup_ready (a futex word the host sets when it has created them
  // with their limits) is 1; -1 means the host failed and the init gives up.
  const char* const* cgroup_bases = nullptr;
  int n_cgroup_bases = 0;              // at most kMaxCgroupBases
  const char* cgroup_procs = nullptr;  // "<id>/cgroup.procs"
  const int* cgroup_ready = nullptr;
  const char* hostname = nullptr;
  const char* state_dir = nullptr;
  const char* state_opts = nullptr;  // tmpfs options for the state tmpfs
  const ChildLayer* layers = nullptr;
  int n_layers = 0;
  const char* dev_opts = nullptr;
  const char* shm_opts = nullptr;
  const char* tmp_opts = nullptr;
  uid_t uid_base = 0;
  uint64_t nofile = 65536;
  uint64_t nproc = 0;                             // 0 = leave
  const confine::ChildPolicy* confine = nullptr;  // required: null fails the start
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// Runs the setup and execs the agent; never returns. `arg` is a ChildPlan*
// (the signature of clone()'s entry point).
int RunChild(void* arg) noexcept;

}  // namespace skiff::jail
