#include "isolation/microvm/vmm_launch.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "base/child_report.h"
#include "base/raw_ids.h"

namespace skiff::microvm {
namespace {

// Async-signal-safe from here to the end of RunChild: only system calls on
// memory prepared by the parent, no allocation, no locks. A failed step is
// reported through the ChildReportPipe (base/child_report.h).
[[noreturn]] void ChildFail(int pipe_fd, const char* call, const char* object, int err) {
  ReportChildFailure(pipe_fd, err, call, object);
}

int BindRo(const char* src, const char* dst) {
  if (::mount(src, dst, nullptr, MS_BIND | MS_REC, nullptr) != 0) return -1;
  return ::mount(nullptr, dst, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr);
}

// Runs one op; nullptr when it succeeded, otherwise the call that failed
// (errno set).
const char* RunOp(const VmmPlan& plan, const VmmPlan::Op& op) {
  switch (op.kind) {
    case VmmPlan::Op::kDevDir:
      if (::mkdir(op.dst.c_str(), 0755) != 0) return "mkdir";
      if (::mount("tmpfs", op.dst.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0)
        return "mount";
      return nullptr;
    case VmmPlan::Op::kCharDev:
      if (::mknod(op.dst.c_str(), S_IFCHR | 0600, op.rdev) != 0) return "mknod";
      if (::chown(op.dst.c_str(), plan.uid, plan.gid) != 0) return "chown";
      return nullptr;
    case VmmPlan::Op::kMkdir:
      return ::mkdir(op.dst.c_str(), 0755) == 0 ? nullptr : "mkdir";
    case VmmPlan::Op::kSymlink:
      return ::symlink(op.src.c_str(), op.dst.c_str()) == 0 ? nullptr : "symlink";
    case VmmPlan::Op::kBindDir:
      if (::mkdir(op.dst.c_str(), 0755) != 0) return "mkdir";
      return BindRo(op.src.c_str(), op.dst.c_str()) == 0 ? nullptr : "bind";
    case VmmPlan::Op::kBindFile: {
      int fd = ::open(op.dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
      if (fd < 0) return "open";
      ::close(fd);
      return BindRo(op.src.c_str(), op.dst.c_str()) == 0 ? nullptr : "bind";
    }
  }
  errno = EINVAL;
  return "op";
}

[[noreturn]] void RunChild(const VmmPlan& plan, const char* const* argv, const char* const* envp,
                           int err_fd) {
  // Move every descriptor the child keeps above the range it fills, then
  // place them: 0-2, then pass_fds at 3.., the error pipe right after.
  constexpr int kHigh = 512;
  int err_high = ::fcntl(err_fd, F_DUPFD_CLOEXEC, kHigh + 64);
  if (err_high < 0) ChildFail(err_fd, "fcntl", "report pipe", errno);
  int std_high[3];
  const int std_src[3] = {plan.stdin_fd, plan.stdout_fd, plan.stderr_fd};
  for (int i = 0; i < 3; i++) {
    std_high[i] = ::fcntl(std_src[i], F_DUPFD_CLOEXEC, kHigh);
    if (std_high[i] < 0) ChildFail(err_high, "fcntl", "stdio", errno);
  }
  int pass_high[16];
  size_t npass = plan.pass_fds.size();
  if (npass > 16) ChildFail(err_high, "pass fds", "more than 16", E2BIG);
  for (size_t i = 0; i < npass; i++) {
    pass_high[i] = ::fcntl(plan.pass_fds[i], F_DUPFD_CLOEXEC, kHigh);
    if (pass_high[i] < 0) ChildFail(err_high, "fcntl", "passed fd", errno);
  }
  for (int i = 0; i < 3; i++)
    if (::dup2(std_high[i], i) < 0) ChildFail(err_high, "dup2", "stdio", errno);
  for (size_t i = 0; i < npass; i++)
    if (::dup2(pass_high[i], static_cast<int>(3 + i)) < 0) ChildFail(err_high, "dup2", "passed fd", errno);
  int err_pipe = static_cast<int>(3 + npass);
  if (::dup3(err_high, err_pipe, O_CLOEXEC) < 0) ChildFail(err_high, "dup3", "report pipe", errno);
  ::syscall(SYS_close_range, err_pipe + 1, ~0U, 0);

  // Default signal dispositions and mask for QEMU; writes past the log size
  // limit fail with EFBIG instead of killing the VMM.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; s++) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    ::signal(s, SIG_DFL);
  }
  ::signal(SIGXFSZ, SIG_IGN);

  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    ChildFail(err_pipe, "mount", "/ (MS_PRIVATE)", errno);
  if (::mount("tmpfs", plan.root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
    ChildFail(err_pipe, "mount", plan.root.c_str(), errno);
  for (size_t i = 0; i < plan.ops.size(); i++)
    if (const char* call = RunOp(plan, plan.ops[i]))
      ChildFail(err_pipe, call, plan.ops[i].dst.c_str(), errno);
  // pivot_root(".", ".") stacks the old root under the new one; detaching
  // it leaves only the new root visible.
  if (::chdir(plan.root.c_str()) != 0) ChildFail(err_pipe, "chdir", plan.root.c_str(), errno);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) ChildFail(err_pipe, "pivot_root", plan.root.c_str(), errno);
  if (::umount2(".", MNT_DETACH) != 0) ChildFail(err_pipe, "umount2", "old root", errno);
  if (::chdir("/") != 0) ChildFail(err_pipe, "chdir", "/", errno);
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    ChildFail(err_pipe, "mount", "/ (read-only)", errno);

  rlimit core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &core) != 0) ChildFail(err_pipe, "setrlimit", "RLIMIT_CORE", errno);
  if (plan.max_file_bytes) {
    rlimit fsize{plan.max_file_bytes, plan.max_file_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &fsize) != 0) ChildFail(err_pipe, "setrlimit", "RLIMIT_FSIZE", errno);
  }
  // Raw system calls (base/raw_ids.h): libc's wrappers hang in this child of
  // a raw clone3 of the multi-threaded daemon.
  if (const char* failed = SetIdsRaw(plan.groups.data(), plan.groups.size(), plan.gid, plan.uid))
    ChildFail(err_pipe, failed, "", errno);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    ChildFail(err_pipe, "prctl", "PR_SET_NO_NEW_PRIVS", errno);
  ::execve(plan.exec_path.c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(envp));
  ChildFail(err_pipe, "execve", plan.exec_path.c_str(), errno);
}

}  // namespace

void AddBaseRoot(VmmPlan& plan, bool kvm, const std::vector<std::pair<std::string, std::string>>& files) {
  using Op = VmmPlan::Op;
  const std::string& r = plan.root;
  plan.ops.push_back({Op::kBindDir, "/usr", r + "/usr"});
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st {};
    if (::lstat(top, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(top, target, sizeof target - 1);
      if (n <= 0) continue;
      plan.ops.push_back({Op::kSymlink, std::string(target, static_cast<size_t>(n)), r + top});
    } else if (S_ISDIR(st.st_mode)) {
      plan.ops.push_back({Op::kBindDir, top, r + top});
    }
  }
  plan.ops.push_back({Op::kMkdir, "", r + "/etc"});
  if (::access("/etc/ld.so.cache", R_OK) == 0)
    plan.ops.push_back({Op::kBindFile, "/etc/ld.so.cache", r + "/etc/ld.so.cache"});
  // With KVM, /dev is its own tmpfs holding a private /dev/kvm node owned
  // by the VMM's uid: a bind of the host node would inherit the root's
  // nodev and the host node's root-only mode.
  struct stat kvm_st {};
  bool kvm_node = kvm && ::stat("/dev/kvm", &kvm_st) == 0 && S_ISCHR(kvm_st.st_mode);
  plan.ops.push_back({kvm_node ? Op::kDevDir : Op::kMkdir, "", r + "/dev"});
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"})
    plan.ops.push_back({Op::kBindFile, dev, r + dev});
  if (kvm_node) plan.ops.push_back({Op::kCharDev, "", r + "/dev/kvm", kvm_st.st_rdev});
  plan.ops.push_back({Op::kMkdir, "", r + "/vm"});
  for (const auto& [host, inside] : files) plan.ops.push_back({Op::kBindFile, host, r + inside});
}

Result<Process> LaunchVmm(const VmmPlan& plan) {
  // Everything the child touches is built here, before clone.
  std::vector<const char*> argv, envp;
  for (const auto& a : plan.argv) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  for (const auto& e : plan.env) envp.push_back(e.c_str());
  envp.push_back(nullptr);

  SKIFF_ASSIGN_OR_RETURN(ChildReportPipe report, ChildReportPipe::Create());

  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
               (plan.new_netns ? CLONE_NEWNET : 0);
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return Error::Sys(Code::kS300, "clone3", "vmm", errno);
  if (pid == 0) RunChild(plan, argv.data(), envp.data(), report.write_fd());

  Process proc(static_cast<pid_t>(pid), UniqueFd(pidfd));
  Status setup = report.Read("vmm setup");
  if (setup.ok()) return proc;  // exec succeeded: the pipe closed on exec
  (void)proc.Wait(std::nullopt);
  return Platform("boot", setup.error().message());
}

}  // namespace skiff::microvm
