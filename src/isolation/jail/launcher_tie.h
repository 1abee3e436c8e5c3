// A CLONE_VM helper child dies with the daemon that launched it — including
// when the daemon dies before the child has run its first instruction.
//
// PR_SET_PDEATHSIG only covers a parent death that happens after the child
// set it. On a loaded host a new child may not be scheduled for a while; a
// daemon killed in that gap leaves the child running on with a copy of the
// daemon's whole descriptor table — every sandbox's liveness lock among
// them — so the next daemon's orphan cleanup takes those sandboxes for
// someone else's and leaves them. The child therefore also looks at a pidfd
// of the daemon right after setting the signal: readable = already gone.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "isolation/jail/child_stack.h"

namespace skiff::jail {

// Host side: a pidfd of this process, opened once, close-on-exec, kept for
// the process's life (a CLONE_VM child inherits it in its descriptor
// table); -1 when the kernel has no pidfd_open.
int LauncherPidfd();

// Child side, async-signal-safe, first thing in the child: false when the
// child must exit at once (the death signal could not be set, or the
// launcher has already exited).
SKIFF_CLONE_CHILD inline bool TieToLauncher(int launcher_pidfd) {
  if (::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) return false;
  if (launcher_pidfd < 0) return true;  // the death signal alone, as before pidfds
  struct pollfd p = {launcher_pidfd, POLLIN, 0};
  struct timespec now = {0, 0};
  // errno is not read: a CLONE_VM child shares it with a running thread.
  long r = -1;
  for (int i = 0; i < 3 && r < 0; ++i) r = ::syscall(SYS_ppoll, &p, 1, &now, nullptr, 0);
  // 0: alive. 1: exited (POLLIN) or not a descriptor at all (POLLNVAL);
  // < 0 every time: cannot tell. Only alive carries on.
  return r == 0;
}

}  // namespace skiff::jail
