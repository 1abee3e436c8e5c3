// Starting QEMU confined: the plan is computed in the parent (allocations,
// string building, lookups), the child created by clone3 only executes it
// with async-signal-safe system calls and execs QEMU.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/pidfd.h"
#include "base/unique_fd.h"

namespace skiff::microvm {

struct VmmPlan {
  // One step that builds the VMM's root inside `root` (a fresh tmpfs).
  struct Op {
    // kDevDir: a small tmpfs that, unlike the root, allows device nodes.
    // kCharDev: a character device node (rdev) owned by the VMM's uid, so
    // the unprivileged VMM can open it whatever the host node's mode.
    enum Kind { kMkdir, kSymlink, kBindDir, kBindFile, kDevDir, kCharDev } kind;
    std::string src;  // kSymlink: link target; kBind*: host path
    std::string dst;  // absolute path under `root`
    dev_t rdev = 0;   // kCharDev
  };
  std::string root;  // host directory the tmpfs is mounted on
  std::vector<Op> ops;
  std::string exec_path;  // QEMU, as seen inside the new root
  std::vector<std::string> argv;
  std::vector<std::string> env;
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<gid_t> groups;  // supplementary (the kvm group with KVM)
  bool new_netns = true;
  uint64_t max_file_bytes = 0;  // RLIMIT_FSIZE for the console/log files
  // Descriptors the child gets: 0 = stdin, 1 = stdout (console), 2 = stderr,
  // then these at 3, 4, ... in order.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<int> pass_fds;
};

// Builds the ops that give the VMM a read-only root with /usr (and the
// merged-usr links or directories /bin /lib /lib64 ...), /etc/ld.so.cache,
// /dev/{null,zero,random,urandom} (+kvm), and `files` (host path -> path
// inside) bound read-only.
void AddBaseRoot(VmmPlan& plan, bool kvm, const std::vector<std::pair<std::string, std::string>>& files);

// Clones the child into new namespaces, runs the plan and execs QEMU.
// Returns once QEMU has been exec'ed (or the setup failed: S300 naming the
// step that failed).
Result<Process> LaunchVmm(const VmmPlan& plan);

}  // namespace skiff::microvm
