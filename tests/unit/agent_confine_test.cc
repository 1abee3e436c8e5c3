// The child confinement: built once, applied in a forked child, checked from
// inside that child.
#include "confine/confine.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace skiff::confine {
namespace {

// Runs `probe` in a confined child; returns its exit code.
template <typename F>
int InConfinedChild(const ChildPolicy& p, F probe) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ApplyResult r = ApplyInChild(p);
    if (!r.ok()) ::_exit(200);
    ::_exit(probe());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

class Confine : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "dropping the bounding set needs CAP_SETPCAP (root)";
    auto p = BuildChildPolicy();
    ASSERT_TRUE(p.ok()) << p.error().ToString();
    policy_ = std::move(*p);
  }
  ChildPolicy policy_;
};

TEST_F(Confine, PolicyHasFilterAndDockerCaps) {
  EXPECT_FALSE(policy_.filter.empty());
  EXPECT_EQ(policy_.keep_caps, 0xa80425fbull);
}

TEST_F(Confine, DeniedSyscallsFailWithEperm) {
  auto expect_eperm = [&](auto call) {
    return InConfinedChild(policy_, [&] { return (call() == -1 && errno == EPERM) ? 0 : 1; });
  };
  EXPECT_EQ(expect_eperm([] { return ::mount("none", "/tmp", "tmpfs", 0, nullptr); }), 0);
  EXPECT_EQ(expect_eperm([] { return ::unshare(CLONE_NEWUSER); }), 0);
  EXPECT_EQ(expect_eperm([] { return ::unshare(CLONE_NEWNS); }), 0);
  EXPECT_EQ(expect_eperm([] { return static_cast<int>(::syscall(SYS_ptrace, 0, 0, 0, 0)); }), 0);
  EXPECT_EQ(expect_eperm([] { return static_cast<int>(::syscall(SYS_bpf, 0, 0, 0)); }), 0);
  EXPECT_EQ(expect_eperm([] { return static_cast<int>(::syscall(SYS_keyctl, 0, 0, 0)); }), 0);
  EXPECT_EQ(expect_eperm([] { return static_cast<int>(::syscall(SYS_setns, 0, 0)); }), 0);
  EXPECT_EQ(expect_eperm([] { return ::personality(0x0040000 /* ADDR_NO_RANDOMIZE */); }), 0);
  // clone3 answers ENOSYS so libc falls back to clone.
  EXPECT_EQ(InConfinedChild(policy_, [] {
              long r = ::syscall(SYS_clone3, nullptr, 0);
              return (r == -1 && errno == ENOSYS) ? 0 : 1;
            }),
            0);
}

TEST_F(Confine, OrdinaryThingsStillWork) {
  EXPECT_EQ(InConfinedChild(policy_, [] {
              // fork, plain unshare flags, the personality query and default.
              pid_t c = ::fork();
              if (c == 0) ::_exit(7);
              int st = 0;
              ::waitpid(c, &st, 0);
              if (!WIFEXITED(st) || WEXITSTATUS(st) != 7) return 1;
              if (::unshare(CLONE_FILES) != 0) return 2;
              if (::personality(0xffffffff) == -1) return 3;
              if (::personality(PER_LINUX) == -1) return 4;
              if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return 5;
              if (::prctl(PR_CAPBSET_READ, 21 /* CAP_SYS_ADMIN */, 0, 0, 0) != 0) return 6;
              if (::prctl(PR_CAPBSET_READ, 0 /* CAP_CHOWN */, 0, 0, 0) != 1) return 8;
              return 0;
            }),
            0);
}

}  // namespace
}  // namespace skiff::confine
