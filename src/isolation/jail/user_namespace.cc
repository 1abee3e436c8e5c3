#include "isolation/jail/user_namespace.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "base/file_io.h"
#include "isolation/jail/launcher_tie.h"
#include "isolation/jail/uid_slots.h"

namespace skiff::jail {
namespace {

// Async-signal-safe: the user-namespace holder only waits to be killed (or
// dies with the thread that made it, should the launcher be killed first).
// Exits at once if the death signal cannot be set (MakeUserNamespace sees it)
// or the launcher is already gone. `arg`: LauncherPidfd().
SKIFF_CLONE_CHILD int HoldNamespace(void* arg) {
  if (!TieToLauncher(static_cast<int>(reinterpret_cast<intptr_t>(arg)))) ::syscall(SYS_exit_group, 125);
  for (;;) ::syscall(SYS_ppoll, nullptr, 0, nullptr, nullptr, 0);
  return 0;
}

}  // namespace

Result<std::unique_ptr<UserNamespace>> MakeUserNamespace(uint32_t base) {
  auto ns = std::make_unique<UserNamespace>();
  int pidfd = -1;
  int pid = CloneVm(HoldNamespace, ns->stack.top(), CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD | SIGCHLD,
                    reinterpret_cast<void*>(static_cast<intptr_t>(LauncherPidfd())), &pidfd);
  if (pid < 0) return Error::Sys(Code::kS300, "clone", "CLONE_NEWUSER", errno);
  ns->holder = Process(pid, UniqueFd(pidfd));
  std::string proc = "/proc/" + std::to_string(pid);
  std::string map = "0 " + std::to_string(base) + " " + std::to_string(kRangeSize) + "\n";
  SKIFF_RETURN_IF_ERROR(WriteKnob(proc + "/uid_map", map));
  SKIFF_RETURN_IF_ERROR(WriteKnob(proc + "/gid_map", map));
  int fd = ::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys(Code::kS300, "open", proc + "/ns/user", errno);
  ns->fd.reset(fd);
  // The holder only ever ends by our SIGKILL, unless it failed to set its
  // death signal.
  if (auto w = ns->holder.Wait(std::chrono::milliseconds(0)); !w.ok() || w->has_value())
    return Platform("isolation", "jail: user-namespace holder exited early (prctl(PR_SET_PDEATHSIG))");
  (void)ns->holder.Signal(SIGKILL);
  return ns;
}

Result<UniqueFd> IdmappedTree(const std::string& dir, int userns_fd) {
  int fd =
      static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (fd < 0) return Error::Sys(Code::kS300, "open_tree", dir, errno);
  UniqueFd tree(fd);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    return Error::Sys(Code::kS300, "mount_setattr(MOUNT_ATTR_IDMAP)", dir, errno);
  return tree;
}

}  // namespace skiff::jail
