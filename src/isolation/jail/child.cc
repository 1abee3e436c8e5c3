// Post-clone setup of the sandbox init. ASYNC-SIGNAL-SAFE ONLY: this runs in
// a child cloned from a multi-threaded process; only raw system calls on
// memory prepared before the clone, no malloc, no locks, no glibc set*id
// wrappers (they broadcast to threads that do not exist here).
#include "isolation/jail/child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/futex.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/child_report.h"
#include "base/fd_passing.h"
#include "base/raw_ids.h"
#include "confine/confine.h"
#include "isolation/jail/launcher_tie.h"

namespace skiff::jail {
namespace {

// Records the failed step for the parent (base/child_report.h) and exits.
// Async-signal-safe.
[[noreturn]] void Fail(const ChildPlan& p, int err, const char* call, const char* object) {
  RecordChildFailure(p.report, err, call, object);
  ::syscall(SYS_exit_group, 125);
  __builtin_unreachable();
}

void Check(const ChildPlan& p, long r, const char* call, const char* object) {
  if (r < 0) Fail(p, errno, call, object);
}

void Mount(const ChildPlan& p, const char* src, const char* target, const char* type, unsigned long flags,
           const char* data) {
  Check(p, ::mount(src, target, type, flags, data), type ? type : "mount", target);
}

// A mount point that must be a real directory: an image could ship a symlink
// at /proc, /dev, /tmp... to redirect a mount elsewhere before pivot_root.
void EnsureDir(const ChildPlan& p, const char* path, mode_t mode) {
  if (::mkdir(path, mode) == 0) return;
  if (errno != EEXIST) Fail(p, errno, "mkdir", path);
  struct stat st;
  if (::lstat(path, &st) < 0) Fail(p, errno, "lstat", path);
  if (!S_ISDIR(st.st_mode)) Fail(p, ENOTDIR, "mountpoint", path);
}

// Owned by root inside the sandbox.
void OwnBySandboxRoot(const ChildPlan& p, const char* path) {
  Check(p, ::syscall(SYS_fchownat, AT_FDCWD, path, p.uid_base, p.uid_base, AT_SYMLINK_NOFOLLOW), "chown",
        path);
}

// Binds /dev/null over a file (or an empty read-only tmpfs over a
// directory) so the sandbox cannot read it. Missing entries are fine.
void MaskPath(const ChildPlan& p, const char* path, bool dir) {
  struct stat st;
  if (::lstat(path, &st) < 0) return;
  if (dir)
    Mount(p, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555");
  else
    Mount(p, "/dev/null", path, nullptr, MS_BIND, nullptr);
}

void ReadOnly(const ChildPlan& p, const char* path) {
  struct stat st;
  if (::lstat(path, &st) < 0) return;
  Mount(p, path, path, nullptr, MS_BIND | MS_REC, nullptr);
  Mount(p, nullptr, path, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
        nullptr);
}

void BindDevice(const ChildPlan& p, const char* host, const char* target) {
  int fd = ::open(target, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) Fail(p, errno, "open", target);
  ::close(fd);
  Mount(p, host, target, nullptr, MS_BIND, nullptr);
}

void Symlink(const ChildPlan& p, const char* to, const char* at) {
  Check(p, ::symlink(to, at), "symlink", at);
  OwnBySandboxRoot(p, at);
}

// Sends an O_PATH descriptor of `path` to the host, tagged `tag`.
void SendPath(const ChildPlan& p, const char* path, char tag) {
  int fd = ::open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) Fail(p, errno, "open", path);
  if (SendWithFd(p.state_sock, &tag, 1, fd) != 1) Fail(p, errno, "sendmsg", path);
  ::close(fd);
}

void LoopbackUp(const ChildPlan& p) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Fail(p, errno, "socket", "lo");
  struct ifreq ifr;
  ::memset(&ifr, 0, sizeof ifr);
  ::memcpy(ifr.ifr_name, "lo", 3);
  Check(p, ::ioctl(s, SIOCGIFFLAGS, &ifr), "ioctl(SIOCGIFFLAGS)", "lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  Check(p, ::ioctl(s, SIOCSIFFLAGS, &ifr), "ioctl(SIOCSIFFLAGS)", "lo");
  ::close(s);
}

// /etc/resolv.conf in the sandbox's writable layer, pointing at the
// gateway's DNS. Runs after pivot_root, so an image's symlinks (at /etc or
// /etc/resolv.conf) resolve inside the sandbox's own root; a symlink at
// resolv.conf itself is replaced, never followed. An image without /etc gets
// no resolv.conf.
void WriteResolvConf(const ChildPlan& p) {
  if (::unlink("/etc/resolv.conf") < 0 && errno != ENOENT) {
    if (errno == ENOTDIR) return;
    Fail(p, errno, "unlink", "/etc/resolv.conf");
  }
  int fd = ::open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    Fail(p, errno, "open", "/etc/resolv.conf");
  }
  size_t len = ::strlen(p.resolv_conf);
  if (::write(fd, p.resolv_conf, len) != static_cast<ssize_t>(len))
    Fail(p, errno, "write", "/etc/resolv.conf");
  Check(p, ::syscall(SYS_fchown, fd, p.uid_base, p.uid_base), "fchown", "/etc/resolv.conf");
  ::close(fd);
}

void SetLimit(const ChildPlan& p, int resource, uint64_t value, const char* name) {
  struct rlimit rl;
  rl.rlim_cur = value;
  rl.rlim_max = value;
  Check(p, ::syscall(SYS_prlimit64, 0, resource, &rl, nullptr), "setrlimit", name);
}

}  // namespace

int RunChild(void* arg) noexcept {
  const ChildPlan& p = *static_cast<const ChildPlan*>(arg);
  // If the launching process dies before this init leaves the host's
  // privileges (it waits on the launcher's cgroup thread below), the init
  // dies too instead of waiting with a copy of the launcher's descriptors —
  // also when the launcher died before this line ran (launcher_tie.h). The
  // setting clears itself at setresuid below, so the agent is not tied to
  // the launching thread's lifetime.
  if (!TieToLauncher(p.launcher_pidfd)) Fail(p, ECHILD, "prctl(PR_SET_PDEATHSIG)", "the launcher");
  // A session of its own, without the launcher's controlling terminal: an
  // agent holding the operator's terminal as its controlling tty could type
  // into the operator's shell with TIOCSTI. (On a terminal that is not its
  // controlling one, TIOCSTI needs CAP_SYS_ADMIN on the host.)
  Check(p, ::setsid(), "setsid", "");
  ::umask(022);
  // The skiff/ cgroup directories, while the host's tree is still visible.
  int cg_dirs[kMaxCgroupBases];
  if (p.n_cgroup_bases > kMaxCgroupBases) Fail(p, E2BIG, "cgroup", "hierarchies");
  for (int i = 0; i < p.n_cgroup_bases; ++i) {
    cg_dirs[i] = ::open(p.cgroup_bases[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cg_dirs[i] < 0) Fail(p, errno, "open", p.cgroup_bases[i]);
  }
  // network: true: the namespace prepared by the host (created in the host's
  // user namespace, so the sandbox's root never administers it). Joined
  // before /sys is mounted, so sysfs shows this namespace's devices.
  if (p.netns_fd >= 0) Check(p, ::syscall(SYS_setns, p.netns_fd, CLONE_NEWNET), "setns", "network namespace");

  Check(p, ::sethostname(p.hostname, ::strlen(p.hostname)), "sethostname", p.hostname);
  LoopbackUp(p);

  // Mounts: nothing propagates back to the host. The per-sandbox tmpfs only
  // exists in this mount namespace, so it dies with the sandbox.
  Mount(p, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
  Mount(p, "tmpfs", p.state_dir, "tmpfs", MS_NOSUID | MS_NODEV, p.state_opts);
  Check(p, ::chdir(p.state_dir), "chdir", p.state_dir);
  EnsureDir(p, "root", 0755);
  for (int i = 0; i < p.n_layers; ++i) {
    const ChildLayer& l = p.layers[i];
    EnsureDir(p, l.upper, 0755);
    OwnBySandboxRoot(p, l.upper);
    EnsureDir(p, l.work, 0700);
    for (int j = 0; j < l.n_lower; ++j) {
      EnsureDir(p, l.lower_dirs[j], 0755);
      Check(p,
            ::syscall(SYS_move_mount, l.lower_fds[j], "", AT_FDCWD, l.lower_dirs[j], MOVE_MOUNT_F_EMPTY_PATH),
            "move_mount", l.lower_dirs[j]);
    }
    if (i > 0) EnsureDir(p, l.mountpoint, 0755);
    Mount(p, "overlay", l.mountpoint, "overlay", MS_NOSUID | MS_NODEV, l.options);
  }

  // /proc, fresh for the new pid namespace, with the sensitive parts masked.
  EnsureDir(p, "root/proc", 0555);
  Mount(p, "proc", "root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  for (const char* f :
       {"root/proc/kcore", "root/proc/keys", "root/proc/key-users", "root/proc/timer_list",
        "root/proc/sched_debug", "root/proc/latency_stats", "root/proc/sysrq-trigger", "root/proc/kallsyms",
        "root/proc/kpagecount", "root/proc/kpageflags", "root/proc/kpagecgroup", "root/proc/config.gz",
        "root/proc/vmallocinfo", "root/proc/slabinfo"})
    MaskPath(p, f, false);
  for (const char* d : {"root/proc/acpi", "root/proc/scsi", "root/proc/asound", "root/proc/driver"})
    MaskPath(p, d, true);
  for (const char* d : {"root/proc/sys", "root/proc/irq", "root/proc/bus", "root/proc/fs"}) ReadOnly(p, d);

  // Minimal /dev.
  EnsureDir(p, "root/dev", 0755);
  Mount(p, "tmpfs", "root/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, p.dev_opts);
  BindDevice(p, "/dev/null", "root/dev/null");
  BindDevice(p, "/dev/zero", "root/dev/zero");
  BindDevice(p, "/dev/full", "root/dev/full");
  BindDevice(p, "/dev/random", "root/dev/random");
  BindDevice(p, "/dev/urandom", "root/dev/urandom");
  BindDevice(p, "/dev/tty", "root/dev/tty");
  EnsureDir(p, "root/dev/pts", 0755);
  Mount(p, "devpts", "root/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  Symlink(p, "pts/ptmx", "root/dev/ptmx");
  EnsureDir(p, "root/dev/shm", 01777);
  Mount(p, "tmpfs", "root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p.shm_opts);
  Symlink(p, "/proc/self/fd", "root/dev/fd");
  Symlink(p, "/proc/self/fd/0", "root/dev/stdin");
  Symlink(p, "/proc/self/fd/1", "root/dev/stdout");
  Symlink(p, "/proc/self/fd/2", "root/dev/stderr");

  // /sys read-only (a fresh sysfs shows only this network namespace).
  EnsureDir(p, "root/sys", 0555);
  Mount(p, "sysfs", "root/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  MaskPath(p, "root/sys/firmware", true);
  MaskPath(p, "root/sys/kernel/security", true);
  MaskPath(p, "root/sys/kernel/debug", true);

  // /tmp.
  EnsureDir(p, "root/tmp", 01777);
  Mount(p, "tmpfs", "root/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_opts);
  if (p.state_sock >= 0) {
    SendPath(p, ".", 's');
    SendPath(p, "root/tmp", 't');
    SendPath(p, "root/dev/shm", 'm');
    ::close(p.state_sock);
  }

  // Into the new root; the old one is detached (the per-sandbox tmpfs stays
  // alive through the overlays that use it).
  Check(p, ::chdir("root"), "chdir", "root");
  Check(p, ::syscall(SYS_pivot_root, ".", "."), "pivot_root", ".");
  Check(p, ::umount2(".", MNT_DETACH), "umount2", "old root");
  Check(p, ::chdir("/"), "chdir", "/");
  if (p.resolv_conf != nullptr) WriteResolvConf(p);

  // Into the sandbox's cgroups, as soon as the host has created them (it
  // does so while the mounts above are set up), then a cgroup namespace
  // rooted there. Before anything of the sandbox runs: the agent is not
  // exec'd yet.
  for (;;) {
    int ready = __atomic_load_n(p.cgroup_ready, __ATOMIC_ACQUIRE);
    if (ready < 0) Fail(p, ECANCELED, "create", "cgroup");
    if (ready > 0) break;
    // Bounded: a launcher killed between the clone and the death signal
    // above must not leave this process waiting forever.
    struct timespec limit = {30, 0};
    if (::syscall(SYS_futex, p.cgroup_ready, FUTEX_WAIT, 0, &limit, nullptr, 0) < 0 && errno == ETIMEDOUT)
      Fail(p, ETIMEDOUT, "wait", "cgroup");
  }
  for (int i = 0; i < p.n_cgroup_bases; ++i) {
    int fd = ::openat(cg_dirs[i], p.cgroup_procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) Fail(p, errno, "open", p.cgroup_procs);
    if (::write(fd, "0", 1) != 1) Fail(p, errno, "write", p.cgroup_procs);
    ::close(fd);
    ::close(cg_dirs[i]);
  }
  Check(p, ::unshare(CLONE_NEWCGROUP), "unshare", "CLONE_NEWCGROUP");

  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) Fail(p, errno, "open", "/dev/null");
  for (int fd = 0; fd < 3; ++fd) Check(p, ::dup2(null_fd, fd), "dup2", "/dev/null");

  // rlimits while still privileged (raising a hard limit needs host rights).
  SetLimit(p, RLIMIT_CORE, 0, "RLIMIT_CORE");
  SetLimit(p, RLIMIT_NOFILE, p.nofile, "RLIMIT_NOFILE");
  if (p.nproc > 0) SetLimit(p, RLIMIT_NPROC, p.nproc, "RLIMIT_NPROC");

  // The user namespace: root inside = uid_base on the host. The mount, pid,
  // net, ipc and uts namespaces stay owned by the host's user namespace, so
  // root inside holds no capability over them (it cannot mount, unmount the
  // masks, or reconfigure the network).
  Check(p, ::syscall(SYS_setns, p.userns_fd, CLONE_NEWUSER), "setns", "user namespace");
  if (const char* failed = SetIdsRaw(nullptr, 0, 0, 0)) Fail(p, errno, failed, "0");

  // Final descriptors: 3 = channel, 4 = agent binary (close-on-exec). Move
  // them out of the way first so no dup2 clobbers another.
  int sock = ::fcntl(p.sock_fd, F_DUPFD_CLOEXEC, 10);
  int agent = ::fcntl(p.agent_fd, F_DUPFD_CLOEXEC, 10);
  if (sock < 0 || agent < 0) Fail(p, errno, "fcntl", "F_DUPFD_CLOEXEC");
  const ChildPlan& q = p;
  Check(q, ::dup2(sock, 3), "dup2", "channel");
  Check(q, ::dup3(agent, 4, O_CLOEXEC), "dup3", "agent");
  Check(q, ::syscall(SYS_close_range, 5, ~0U, 0), "close_range", "5..");

  // Fail closed: never exec the agent without its confinement.
  if (p.confine == nullptr) Fail(q, EINVAL, "confine", "no policy");
  confine::ApplyResult r = confine::ApplyInChild(*p.confine);
  if (!r.ok()) Fail(q, r.err, "confine", r.step);
  ::syscall(SYS_execveat, 4, "", p.argv, p.envp, AT_EMPTY_PATH);
  Fail(q, errno, "execveat", p.argv[0]);
  return 125;
}

}  // namespace skiff::jail
