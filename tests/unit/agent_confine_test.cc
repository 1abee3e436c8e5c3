// The child confinement: built once, applied in a forked child, checked from
// inside that child.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "confine/confine.h"

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
  EXPECT_EQ(InConfinedChild(policy_,
                            [] {
                              long r = ::syscall(SYS_clone3, nullptr, 0);
                              return (r == -1 && errno == ENOSYS) ? 0 : 1;
                            }),
            0);
}

TEST_F(Confine, OrdinaryThingsStillWork) {
  EXPECT_EQ(InConfinedChild(policy_,
                            [] {
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

// The agent applies the inheritable part once (ApplyToParent) and each
// child only the rest: the child must end up exactly as confined as with
// the full ApplyInChild.
TEST_F(Confine, ParentAppliedPathConfinesChildrenTheSame) {
  auto state = [] {
    // Bit 0..40: bounding set; then effective/permitted/inheritable words,
    // no_new_privs, seccomp mode, core limit.
    std::string out;
    for (int cap = 0; cap <= 40; ++cap) out += ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0 ? '1' : '0';
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    ::syscall(SYS_capget, &hdr, data);
    for (auto& d : data)
      out += " " + std::to_string(d.effective) + "/" + std::to_string(d.permitted) + "/" +
             std::to_string(d.inheritable);
    out += " nnp=" + std::to_string(::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    out += " seccomp=" + std::to_string(::prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
    rlimit core{};
    ::getrlimit(RLIMIT_CORE, &core);
    out += " core=" + std::to_string(core.rlim_max);
    return out;
  };
  // Each variant reports its child's state through a pipe.
  auto run = [&](bool parent_first) {
    int pfd[2];
    EXPECT_EQ(::pipe(pfd), 0);
    pid_t parent = ::fork();
    if (parent == 0) {
      ChildPolicy p = policy_;
      if (parent_first && !ApplyToParent(p).ok()) ::_exit(201);
      pid_t child = ::fork();
      if (child == 0) {
        if (!ApplyInChild(p).ok()) ::_exit(200);
        std::string s = state();
        (void)!::write(pfd[1], s.data(), s.size());
        ::_exit(0);
      }
      int st = 0;
      ::waitpid(child, &st, 0);
      ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 255);
    }
    ::close(pfd[1]);
    int st = 0;
    ::waitpid(parent, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = ::read(pfd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(pfd[0]);
    return out;
  };
  std::string full = run(false), split = run(true);
  EXPECT_FALSE(full.empty());
  EXPECT_EQ(split, full);
  EXPECT_NE(full.find("nnp=1"), std::string::npos) << full;
  EXPECT_NE(full.find("seccomp=2"), std::string::npos) << full;
}

}  // namespace
}  // namespace skiff::confine
