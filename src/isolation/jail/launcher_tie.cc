#include "isolation/jail/launcher_tie.h"

namespace skiff::jail {

int LauncherPidfd() {
  // pidfd_open sets O_CLOEXEC itself; never closed (see the header).
  static const int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  return fd;
}

}  // namespace skiff::jail
