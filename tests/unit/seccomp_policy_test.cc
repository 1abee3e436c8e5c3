// The exported seccomp program, evaluated without a kernel: every denied
// syscall on every architecture, ordinary syscalls, and both sides of each
// argument check (clone/unshare namespace flags, clone3, personality).
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cerrno>
#include <string>

#include "bpf_emulator.h"
#include "confine/confine.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace skiff::confine {
namespace {

constexpr uint32_t kEperm = SECCOMP_RET_ERRNO | EPERM;
constexpr uint32_t kEnosys = SECCOMP_RET_ERRNO | ENOSYS;
constexpr uint32_t kX32Bit = 0x40000000;

class SeccompPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = BuildChildPolicy();
    ASSERT_TRUE(p.ok()) << p.error().ToString();
    filter_ = std::move(p->filter);
  }
  // The verdict for one call; a malformed program fails the test.
  uint32_t Verdict(uint32_t arch, int nr, uint64_t a0 = 0) const {
    auto r = bpf::Run(filter_, bpf::SyscallData(arch, nr, a0));
    EXPECT_TRUE(r.ok()) << r.error;
    return r.verdict;
  }
  uint32_t X86_64(const char* name, uint64_t a0 = 0) const {
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    EXPECT_GE(nr, 0) << name;
    return Verdict(AUDIT_ARCH_X86_64, nr, a0);
  }
  std::vector<sock_filter> filter_;
};

TEST_F(SeccompPolicy, EveryDeniedSyscallIsEpermOnX86_64) {
  int checked = 0;
  for (const char* name : DeniedSyscalls()) {
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    if (nr < 0) continue;  // not an x86_64 syscall (e.g. vm86): nothing to deny
    EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, nr), kEperm) << name;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// The filter is built for the native ABI only. An x32 call (x86_64 arch,
// syscall bit 30) and an i386 call are not answered by the deny list: the
// filter's answer for a foreign ABI is to kill, for every syscall, so a
// denied one is never allowed there either.
TEST_F(SeccompPolicy, DeniedSyscallsAreNotAllowedThroughX32OrI386) {
  for (const char* name : DeniedSyscalls()) {
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    if (nr >= 0) {
      uint32_t v = Verdict(AUDIT_ARCH_X86_64, static_cast<int>(nr | kX32Bit));
      EXPECT_NE(v, SECCOMP_RET_ALLOW) << "x32 " << name;
      EXPECT_EQ(v & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_THREAD) << "x32 " << name;
    }
    int nr32 = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, name);
    if (nr32 >= 0) {
      uint32_t v = Verdict(AUDIT_ARCH_I386, nr32);
      EXPECT_NE(v, SECCOMP_RET_ALLOW) << "i386 " << name;
      EXPECT_EQ(v & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_THREAD) << "i386 " << name;
    }
  }
}

TEST_F(SeccompPolicy, ForeignArchitecturesAreKilled) {
  for (uint32_t arch : {uint32_t{AUDIT_ARCH_I386}, uint32_t{AUDIT_ARCH_AARCH64}, uint32_t{0x12345678}}) {
    for (int nr : {0, 1, 59, 165}) {
      EXPECT_EQ(Verdict(arch, nr) & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_THREAD)
          << std::hex << arch << " nr " << std::dec << nr;
    }
  }
  // Ordinary x32 calls too (the x32 ABI is not part of the policy).
  EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, static_cast<int>(__NR_read | kX32Bit)) & SECCOMP_RET_ACTION_FULL,
            SECCOMP_RET_KILL_THREAD);
}

TEST_F(SeccompPolicy, OrdinarySyscallsAreAllowed) {
  for (const char* name :
       {"read",  "write",  "openat", "close", "execve", "mmap", "mprotect", "munmap", "brk",    "exit_group",
        "wait4", "getpid", "socket", "ioctl", "futex",  "fork", "vfork",    "prctl",  "setuid", "chdir"}) {
    EXPECT_EQ(X86_64(name), SECCOMP_RET_ALLOW) << name;
  }
  // The highest syscall numbers and one past them are not in the deny list.
  EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, 1000), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompPolicy, CloneAndUnshareRefuseNamespaceFlags) {
  const uint64_t kNs[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                          CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                          CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  EXPECT_EQ(X86_64("clone", thread), SECCOMP_RET_ALLOW);
  EXPECT_EQ(X86_64("clone", SIGCHLD), SECCOMP_RET_ALLOW);
  EXPECT_EQ(X86_64("unshare", CLONE_FILES | CLONE_FS), SECCOMP_RET_ALLOW);
  for (uint64_t f : kNs) {
    EXPECT_EQ(X86_64("clone", f | SIGCHLD), kEperm) << std::hex << f;
    EXPECT_EQ(X86_64("clone", f | thread), kEperm) << std::hex << f;
    EXPECT_EQ(X86_64("unshare", f), kEperm) << std::hex << f;
    EXPECT_EQ(X86_64("unshare", f | CLONE_FILES), kEperm) << std::hex << f;
  }
  // CLONE_NEWTIME is the exit-signal byte's bit 7 for clone: checked on unshare only.
  EXPECT_EQ(X86_64("unshare", CLONE_NEWTIME), kEperm);
  EXPECT_EQ(X86_64("clone", CLONE_NEWTIME), SECCOMP_RET_ALLOW);
  // The flags are an int: the upper half of the register is not looked at by
  // the kernel, and a namespace bit there is not one.
  EXPECT_EQ(X86_64("unshare", uint64_t{CLONE_NEWUSER} << 32), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompPolicy, IoUringSecretMemoryAndLdtAreDenied) {
  for (int nr :
       {__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_memfd_secret, __NR_modify_ldt})
    EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, nr), kEperm) << nr;
}

TEST_F(SeccompPolicy, VsockSocketsAreDeniedOtherFamiliesAllowed) {
  EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, __NR_socket, AF_VSOCK), kEperm);
  EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, __NR_socketpair, AF_VSOCK), kEperm);
  for (uint64_t family : {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}) {
    EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, __NR_socket, family), SECCOMP_RET_ALLOW) << family;
    EXPECT_EQ(Verdict(AUDIT_ARCH_X86_64, __NR_socketpair, family), SECCOMP_RET_ALLOW) << family;
  }
}

TEST_F(SeccompPolicy, Clone3AnswersEnosys) {
  EXPECT_EQ(X86_64("clone3"), kEnosys);
  EXPECT_EQ(X86_64("clone3", CLONE_NEWUSER), kEnosys);
}

TEST_F(SeccompPolicy, PersonalityAllowsOnlyTheDefaultDomainsAndTheQuery) {
  for (uint64_t ok :
       {0x0ull, 0x0008ull /* PER_LINUX32 */, 0x20000ull /* UNAME26 */, 0x20008ull, 0xffffffffull}) {
    EXPECT_EQ(X86_64("personality", ok), SECCOMP_RET_ALLOW) << std::hex << ok;
  }
  for (uint64_t bad : {0x0040000ull /* ADDR_NO_RANDOMIZE */, 0x0400000ull /* READ_IMPLIES_EXEC */,
                       0x0000001ull, 0x80000000ull, 0xfffffffeull, 0x7fffffffull}) {
    EXPECT_EQ(X86_64("personality", bad), kEperm) << std::hex << bad;
  }
}

}  // namespace
}  // namespace skiff::confine
