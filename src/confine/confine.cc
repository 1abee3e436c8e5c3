#include "confine/confine.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "base/unique_fd.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace skiff::confine {
namespace {

constexpr uint64_t Bit(int cap) { return uint64_t{1} << cap; }

// Syscalls denied outright (EPERM), in the spirit of Docker's default profile.
const std::vector<const char*> kDenied = {
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "bpf",
    "perf_event_open",
    "fanotify_init",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "setns",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "stime",
    "syslog",
    "vm86",
    "vm86old",
    "nfsservctl",
    "sysfs",
    "_sysctl",
    "uselib",
    "ustat",
    "afs_syscall",
    "vhangup",
    // Denied by Docker's profile too: io_uring (a second syscall surface the
    // filter cannot see into), secret memory areas, and LDT changes.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "memfd_secret",
    "modify_ldt",
};

constexpr uint64_t kNamespaceFlags =
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

Result<std::vector<sock_filter>> BuildFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Platform("isolation", "seccomp_init failed");
  ScopedCleanup release([&] { seccomp_release(ctx); });
  // The filter is installed by the caller after PR_SET_NO_NEW_PRIVS.
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  auto add = [&](int nr, uint32_t action, unsigned n, const scmp_arg_cmp* cmp) -> Status {
    int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
    if (r < 0)
      return Platform("isolation",
                      "seccomp_rule_add(" + std::to_string(nr) + "): " + std::string(ErrnoName(-r)));
    return OkStatus();
  };
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue;  // not on this architecture
    SKIFF_RETURN_IF_ERROR(add(nr, SCMP_ACT_ERRNO(EPERM), 0, nullptr));
  }
  // clone: no new namespaces. (CLONE_NEWTIME shares its bit with the exit
  // signal in clone's flags, so it is checked on unshare only.)
  for (uint64_t f = 1; f != 0; f <<= 1) {
    if ((kNamespaceFlags & f) == 0) continue;
    scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, f, f);
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(clone), SCMP_ACT_ERRNO(EPERM), 1, &c));
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(unshare), SCMP_ACT_ERRNO(EPERM), 1, &c));
  }
  {
    scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME);
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(unshare), SCMP_ACT_ERRNO(EPERM), 1, &c));
  }
  // AF_VSOCK is not network-namespaced: a sandbox could bind host vsock
  // ports or reach the hypervisor whatever its network setting.
  {
    scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, AF_VSOCK);
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(socket), SCMP_ACT_ERRNO(EPERM), 1, &c));
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(socketpair), SCMP_ACT_ERRNO(EPERM), 1, &c));
  }
  // clone3 passes its flags in memory a filter cannot read: answer ENOSYS so
  // libc falls back to clone, whose flags are checked above.
  SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(clone3), SCMP_ACT_ERRNO(ENOSYS), 0, nullptr));
  // personality: only the default domain, PER_LINUX32, UNAME26 (and their
  // union) and the 0xffffffff query are allowed. Expressed per bit, since a
  // rule may compare an argument once: deny when a disallowed bit is set while
  // bit 31 is clear, or bit 31 is set while any other bit is clear.
  for (int b = 0; b < 31; ++b) {
    uint64_t bit = uint64_t{1} << b, top = uint64_t{1} << 31;
    if (b != 3 && b != 17) {
      scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, bit | top, bit);
      SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(personality), SCMP_ACT_ERRNO(EPERM), 1, &c));
    }
    scmp_arg_cmp c2 = SCMP_A0(SCMP_CMP_MASKED_EQ, bit | top, top);
    SKIFF_RETURN_IF_ERROR(add(SCMP_SYS(personality), SCMP_ACT_ERRNO(EPERM), 1, &c2));
  }

  // Export the BPF program into memory.
  UniqueFd mem(static_cast<int>(::syscall(SYS_memfd_create, "skiff-seccomp", MFD_CLOEXEC)));
  if (!mem) return Error::Sys(Code::kS300, "memfd_create", "seccomp", errno);
  int r = seccomp_export_bpf(ctx, mem.get());
  if (r < 0) return Platform("isolation", "seccomp_export_bpf: " + std::string(ErrnoName(-r)));
  struct stat st {};
  if (::fstat(mem.get(), &st) < 0) return Error::Sys(Code::kS300, "fstat", "seccomp", errno);
  if (st.st_size <= 0 || st.st_size % sizeof(sock_filter) != 0 || st.st_size > (1 << 20))
    return Platform("isolation", "seccomp_export_bpf produced " + std::to_string(st.st_size) + " bytes");
  std::vector<sock_filter> prog(static_cast<size_t>(st.st_size) / sizeof(sock_filter));
  size_t want = static_cast<size_t>(st.st_size), got = 0;
  char* dst = reinterpret_cast<char*>(prog.data());
  while (got < want) {
    ssize_t n = ::pread(mem.get(), dst + got, want - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Sys(Code::kS300, "pread", "seccomp", n < 0 ? errno : EIO);
    got += static_cast<size_t>(n);
  }
  return prog;
}

int ReadLastCap() {
  std::ifstream f("/proc/sys/kernel/cap_last_cap");
  int v = 0;
  if (f >> v && v > 0 && v < 64) return v;
  return CAP_LAST_CAP;
}

}  // namespace

uint64_t DefaultCapabilityMask() {
  return Bit(CAP_CHOWN) | Bit(CAP_DAC_OVERRIDE) | Bit(CAP_FOWNER) | Bit(CAP_FSETID) | Bit(CAP_KILL) |
         Bit(CAP_SETGID) | Bit(CAP_SETUID) | Bit(CAP_SETPCAP) | Bit(CAP_NET_BIND_SERVICE) | Bit(CAP_NET_RAW) |
         Bit(CAP_SYS_CHROOT) | Bit(CAP_MKNOD) | Bit(CAP_AUDIT_WRITE) | Bit(CAP_SETFCAP);
}

const std::vector<const char*>& DeniedSyscalls() { return kDenied; }

Result<ChildPolicy> BuildChildPolicy() {
  ChildPolicy p;
  p.keep_caps = DefaultCapabilityMask();
  p.last_cap = ReadLastCap();
  SKIFF_ASSIGN_OR_RETURN(p.filter, BuildFilter());
  return p;
}

// Async-signal-safe: raw syscalls on data prepared by the parent.
namespace {

ApplyResult LowerNofile(const ChildPolicy& p) noexcept {
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    rlimit want = nofile;
    if (want.rlim_max > p.nofile) want.rlim_max = p.nofile;
    if (want.rlim_cur > want.rlim_max) want.rlim_cur = want.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) < 0) return {errno, "setrlimit(RLIMIT_NOFILE)"};
  }
  return {};
}

ApplyResult DropBoundingAndAmbient(const ChildPolicy& p) noexcept {
  // Bounding set first (needs CAP_SETPCAP, which is kept).
  for (int cap = 0; cap <= p.last_cap; ++cap) {
    if (p.keep_caps & Bit(cap)) continue;
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) <= 0) continue;  // already gone / unknown
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return {errno, "prctl(PR_CAPBSET_DROP)"};
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return {errno, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)"};
  return {};
}

ApplyResult LoadFilter(const ChildPolicy& p) noexcept {
  if (p.filter.empty()) return {};
  sock_fprog prog{static_cast<unsigned short>(p.filter.size()), const_cast<sock_filter*>(p.filter.data())};
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) return {errno, "prctl(PR_SET_SECCOMP)"};
  return {};
}

}  // namespace

ApplyResult ApplyToParent(ChildPolicy& p) noexcept {
  rlimit core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &core) < 0) return {errno, "setrlimit(RLIMIT_CORE)"};
  if (auto r = DropBoundingAndAmbient(p); !r.ok()) return r;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return {errno, "prctl(PR_SET_NO_NEW_PRIVS)"};
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) < 0) return {errno, "capget"};
  // What a child keeps: the parent's sets within the policy (the same
  // computation as the full path below, done once).
  uint32_t keep[2] = {static_cast<uint32_t>(p.keep_caps), static_cast<uint32_t>(p.keep_caps >> 32)};
  for (int i = 0; i < 2; i++) {
    p.child_caps[0][i] = data[i].effective & keep[i];
    p.child_caps[1][i] = data[i].permitted & keep[i];
    p.child_caps[2][i] = data[i].inheritable & keep[i];
  }
  p.parent_applied = true;
  return {};
}

ApplyResult ApplyInChild(const ChildPolicy& p) noexcept {
  if (p.parent_applied) {
    // Core limit, bounding and ambient sets, no_new_privs: inherited.
    if (auto r = LowerNofile(p); !r.ok()) return r;
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    for (int i = 0; i < 2; i++) {
      data[i].effective = p.child_caps[0][i];
      data[i].permitted = p.child_caps[1][i];
      data[i].inheritable = p.child_caps[2][i];
    }
    if (::syscall(SYS_capset, &hdr, data) < 0) return {errno, "capset"};
    return LoadFilter(p);
  }
  rlimit core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &core) < 0) return {errno, "setrlimit(RLIMIT_CORE)"};
  if (auto r = LowerNofile(p); !r.ok()) return r;
  if (auto r = DropBoundingAndAmbient(p); !r.ok()) return r;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) < 0) return {errno, "capget"};
  uint32_t keep_lo = static_cast<uint32_t>(p.keep_caps);
  uint32_t keep_hi = static_cast<uint32_t>(p.keep_caps >> 32);
  data[0].effective &= keep_lo;
  data[0].permitted &= keep_lo;
  data[0].inheritable &= keep_lo;
  data[1].effective &= keep_hi;
  data[1].permitted &= keep_hi;
  data[1].inheritable &= keep_hi;
  if (::syscall(SYS_capset, &hdr, data) < 0) return {errno, "capset"};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return {errno, "prctl(PR_SET_NO_NEW_PRIVS)"};
  return LoadFilter(p);
}

}  // namespace skiff::confine
