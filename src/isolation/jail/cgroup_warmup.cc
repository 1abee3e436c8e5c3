#include "isolation/jail/cgroup_warmup.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "base/log.h"
#include "base/thread.h"
#include "isolation/jail/child_stack.h"
#include "isolation/jail/launcher_tie.h"

namespace skiff::jail {
namespace {

struct WarmupArgs {
  const char* procs;   // <skiff/>/cgroup.procs
  int launcher_pidfd;  // LauncherPidfd()
};

// Async-signal-safe, in a throwaway CLONE_VM child: moves itself into the
// cgroup whose cgroup.procs is `arg->procs` every 5 ms until it is killed
// (it dies with the thread that made it should that thread go first, or at
// once when the launcher is already gone). It opens the file in its own
// descriptor table, so the parent's holds nothing for it.
SKIFF_CLONE_CHILD int MoveSelfUntilKilled(void* arg) {
  const auto* a = static_cast<const WarmupArgs*>(arg);
  if (!TieToLauncher(a->launcher_pidfd)) ::syscall(SYS_exit_group, 125);
  int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, a->procs, O_WRONLY | O_CLOEXEC));
  for (;;) {
    if (fd >= 0 && ::syscall(SYS_write, fd, "0", 1) != 1) {
      ::syscall(SYS_close, fd);
      fd = -1;  // no head start to give: just wait to be killed
    }
    struct timespec ts = {0, 5 * 1000L * 1000};  // 5 ms
    ::syscall(SYS_ppoll, nullptr, 0, fd >= 0 ? &ts : nullptr, nullptr, 0);
  }
  return 0;
}

}  // namespace

void CgroupWarmup::Start(std::string procs) {
  procs_ = std::move(procs);
  Result<std::thread> t = StartThread("jail: cgroup warm-up", [this] { Run(); });
  if (!t.ok()) {
    SKIFF_LOG(Debug) << "jail: no cgroup warm-up thread: " << t.error().ToString();  // only slower
    return;
  }
  thread_ = std::move(t).value();
}

void CgroupWarmup::End(bool join) {
  std::thread t;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    if (join) t = std::move(thread_);  // exactly one caller joins
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void CgroupWarmup::Run() {
  ChildStack stack;                                  // outlives the child: reaped below, before return
  WarmupArgs args{procs_.c_str(), LauncherPidfd()};  // likewise
  int pid = CloneVm(MoveSelfUntilKilled, stack.top(), CLONE_VM | SIGCHLD, &args, nullptr);
  if (pid < 0) return;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::seconds(2), [&] { return stop_; });
  }
  // Our own unreaped child (the host never waits for "any child"), so the
  // pid cannot have been reused; no pidfd keeps a descriptor open meanwhile.
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace skiff::jail
