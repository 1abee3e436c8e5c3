// launcher_tie.h: a CLONE_VM helper child whose launcher is already gone
// when it first runs exits at once instead of living on with a copy of the
// launcher's descriptors; with its launcher alive it carries on.
#include "isolation/jail/launcher_tie.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>

#include "base/pidfd.h"
#include "isolation/jail/child_stack.h"

namespace skiff::jail {
namespace {

SKIFF_CLONE_CHILD int Tied(void* arg) {
  if (!TieToLauncher(*static_cast<const int*>(arg))) ::syscall(SYS_exit_group, 125);
  ::syscall(SYS_exit_group, 7);
  return 0;
}

// The exit status of a Tied child given `launcher_pidfd`.
int RunTied(int launcher_pidfd) {
  ChildStack stack;
  int pidfd = -1;
  int pid = CloneVm(Tied, stack.top(), CLONE_VM | CLONE_PIDFD | SIGCHLD, &launcher_pidfd, &pidfd);
  EXPECT_GT(pid, 0);
  if (pid <= 0) return -1;
  Process child(pid, UniqueFd(pidfd));
  auto st = child.Wait(std::chrono::seconds(10));
  EXPECT_TRUE(st.ok() && st->has_value()) << "the tied child did not end";
  return st.ok() && st->has_value() && WIFEXITED(**st) ? WEXITSTATUS(**st) : -1;
}

TEST(LauncherTie, ALiveLauncherLetsTheChildRun) {
  ASSERT_GE(LauncherPidfd(), 0);
  EXPECT_EQ(LauncherPidfd(), LauncherPidfd()) << "opened once";
  EXPECT_EQ(RunTied(LauncherPidfd()), 7);
}

TEST(LauncherTie, AGoneLauncherEndsTheChildAtOnce) {
  // A "launcher" that has already exited: a child of ours, exited (and
  // reaped), seen through its pidfd.
  pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  auto launcher = Process::Open(gone);
  ASSERT_TRUE(launcher.ok());
  auto st = launcher->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_EQ(RunTied(launcher->pidfd()), 125);
}

TEST(LauncherTie, AnUnreadablePidfdFailsClosed) {
  EXPECT_EQ(RunTied(-1), 7) << "no pidfd: the death signal alone, as before";
  EXPECT_EQ(RunTied(1000000), 125) << "a descriptor that is not open: cannot tell, so the child ends";
}

}  // namespace
}  // namespace skiff::jail
