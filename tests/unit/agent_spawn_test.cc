// The agent's spawn without a sandbox: real children (no confinement, the
// test's own credentials) whose failures come back through the one
// post-clone report format (base/child_report.h), and the decoding of each
// step's report into an exec result or an S-code error.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "agent/spawn.h"
#include "agent/spawn_failure.h"
#include "base/child_report.h"
#include "support/temp_dir.h"

namespace skiff::agent {
namespace {

class AgentSpawn : public ::testing::Test {
 protected:
  void TearDown() override {
    // A failed spawn leaves its child (exit 127) to the agent's reaper.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  std::string File(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ / name;
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  static SpawnRequest Request(std::vector<std::string> argv) {
    SpawnRequest req;
    req.argv = std::move(argv);
    req.env = {"PATH=/usr/bin:/bin"};
    return req;
  }

  testing_support::TempDir dir_{"spawn-test"};
};

std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

ChildFailure Report(SpawnStep step, int err, const char* call, const char* object = "") {
  ChildFailure f;
  RecordChildFailure(&f, err, call, object, static_cast<int>(step));
  return f;
}

TEST_F(AgentSpawn, AProgramThatRunsIsStarted) {
  auto o = Spawn(Request({"echo", "hello"}), nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  ASSERT_TRUE(o->started);
  EXPECT_EQ(ReadAll(o->proc.stdout_r.get()), "hello\n");
  int ws = 0;
  ASSERT_EQ(::waitpid(o->proc.pid, &ws, 0), o->proc.pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

// A terminal: the child is a session leader whose controlling terminal is
// the pty (stdin, stdout and stderr), of the requested size, and the parent
// reads everything from the master until the slave's last copy closes.
TEST_F(AgentSpawn, ATerminalIsTheChildsControllingTty) {
  if (::access("/dev/ptmx", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/ptmx";
  SpawnRequest req = Request({"sh", "-c", "stty size; test -t 0 && test -t 2 && echo tty; ps -o sid= -p $$"});
  req.terminal = TerminalSize{33, 77};
  auto o = Spawn(req, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  ASSERT_TRUE(o->started);
  ASSERT_TRUE(o->proc.terminal.valid());
  EXPECT_FALSE(o->proc.stdout_r.valid());
  EXPECT_FALSE(o->proc.stdin_w.valid());
  std::string out;
  for (;;) {
    char buf[256];
    ssize_t n = ::read(o->proc.terminal.get(), buf, sizeof buf);
    if (n < 0 && errno == EAGAIN) {
      ::usleep(10000);
      continue;
    }
    if (n <= 0) break;  // EIO: the slave is closed
    out.append(buf, static_cast<size_t>(n));
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(o->proc.pid, &ws, 0), o->proc.pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << out;
  EXPECT_EQ(out.rfind("33 77\r\ntty\r\n", 0), 0u) << out;
  EXPECT_NE(out.find(std::to_string(o->proc.pid)), std::string::npos) << out;  // its own session
}

TEST_F(AgentSpawn, NullStdinIsDevNull) {
  SpawnRequest req = Request({"sh", "-c", "readlink /proc/self/fd/0"});
  req.null_stdin = true;
  auto o = Spawn(req, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_FALSE(o->proc.stdin_w.valid());
  EXPECT_EQ(ReadAll(o->proc.stdout_r.get()), "/dev/null\n");
  ::waitpid(o->proc.pid, nullptr, 0);
}

// Each of these goes through a real child's report: the step and the errno
// written after the clone must come back as the outcome of that step.
TEST_F(AgentSpawn, AMissingProgramIs127) {
  auto o = Spawn(Request({"no-such-program-xyz"}), nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_FALSE(o->started);
  EXPECT_EQ(o->failure.exit_code, 127);
  EXPECT_EQ(o->failure.stderr_text, "exec: no-such-program-xyz: not found\n");
  o = Spawn(Request({dir_ / "missing"}), nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->failure.exit_code, 127);
}

TEST_F(AgentSpawn, AFileThatCannotBeRunIs126) {
  std::string noexec = File("noexec", "#!/bin/sh\n", 0644);
  auto o = Spawn(Request({noexec}), nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_FALSE(o->started);
  EXPECT_EQ(o->failure.exit_code, 126);
  EXPECT_EQ(o->failure.stderr_text, "exec: " + noexec + ": permission denied\n");
  std::string garbage = File("garbage", "\x01\x02 not a program", 0755);
  o = Spawn(Request({garbage}), nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->failure.exit_code, 126);
  EXPECT_EQ(o->failure.stderr_text, "exec: " + garbage + ": exec format error\n");
}

TEST_F(AgentSpawn, CredentialsThatCannotBeSetAreS300NamingTheCall) {
  // More supplementary groups than the kernel takes: setgroups fails for
  // root (EINVAL) and anyone else (EPERM) alike.
  SpawnRequest req = Request({"true"});
  req.creds = Credentials{4242, 4242, std::vector<gid_t>(70000, 4242)};
  auto o = Spawn(req, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code(), Code::kS300);
  EXPECT_EQ(
      o.error().message().rfind("platform failure: exec: switching to uid 4242 for true: setgroups: E", 0),
      0u)
      << o.error().message();
}

TEST_F(AgentSpawn, AWorkdirTheChildCannotEnterIsAnFsError) {
  // The parent's early stat of the workdir succeeds; the child's chdir
  // fails for want of search permission, and its report must come back as
  // the workdir's fs error. Root passes every permission check, so the
  // spawn runs in a forked process that has become nobody first.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  std::string locked = dir_ / "locked";
  ASSERT_EQ(::mkdir(locked.c_str(), 0), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(2);
    SpawnRequest req = Request({"true"});
    req.cwd = locked;
    auto o = Spawn(req, nullptr);
    bool as_expected = !o.ok() && o.error().code() == Code::kS215 &&
                       o.error().message().find("workdir " + locked) != std::string::npos;
    ::_exit(as_expected ? 0 : 1);
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFEXITED(ws));
  EXPECT_EQ(WEXITSTATUS(ws), 0) << "1: not S215 for the workdir; 2: could not become nobody";
}

TEST(AgentSpawnFailure, EachStepDecodesToItsOwnOutcome) {
  SpawnRequest req;
  req.argv = {"prog"};
  req.cwd = "/work";
  // The workdir: the codes of a missing or wrong-typed path, else the fs code.
  auto r = SpawnFailureOutcome(req, Report(SpawnStep::kWorkdir, ENOENT, "chdir", "/work"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS211);
  EXPECT_EQ(r.error().message(), "file not found: workdir /work");
  r = SpawnFailureOutcome(req, Report(SpawnStep::kWorkdir, ENOTDIR, "chdir", "/work"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS212);
  r = SpawnFailureOutcome(req, Report(SpawnStep::kWorkdir, EACCES, "chdir", "/work"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS215);
  // execve: exec results for a missing or unrunnable program.
  struct {
    int err, exit_code;
    const char* text;
  } execs[] = {
      {ENOENT, 127, "exec: prog: not found\n"},         {ENOTDIR, 127, "exec: prog: not found\n"},
      {EACCES, 126, "exec: prog: permission denied\n"}, {EPERM, 126, "exec: prog: permission denied\n"},
      {EISDIR, 126, "exec: prog: permission denied\n"}, {ENOEXEC, 126, "exec: prog: exec format error\n"},
  };
  for (const auto& e : execs) {
    r = SpawnFailureOutcome(req, Report(SpawnStep::kExec, e.err, "execve", "prog"));
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_FALSE(r->started);
    EXPECT_EQ(r->failure.exit_code, e.exit_code) << e.err;
    EXPECT_EQ(r->failure.stderr_text, e.text) << e.err;
  }
  r = SpawnFailureOutcome(req, Report(SpawnStep::kExec, E2BIG, "execve", "prog"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "platform failure: exec: execve(prog): E2BIG");
  // The other steps: S300 naming the step, the call and the errno.
  r = SpawnFailureOutcome(req, Report(SpawnStep::kSetup, EBADF, "dup2", "stdout"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_EQ(r.error().message(), "platform failure: exec: setting up prog: dup2(stdout): EBADF");
  r = SpawnFailureOutcome(req, Report(SpawnStep::kConfine, EPERM, "seccomp"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "platform failure: exec: confining prog: seccomp: EPERM");
  req.creds = Credentials{1000, 1000, {1000}};
  r = SpawnFailureOutcome(req, Report(SpawnStep::kCredentials, EPERM, "setresuid"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "platform failure: exec: switching to uid 1000 for prog: setresuid: EPERM");
  // A record without the agent's step (0, or a number it never writes) is
  // not taken for one of them.
  for (int step : {0, 6, -1}) {
    ChildFailure f;
    RecordChildFailure(&f, ENOENT, "execve", "prog", step);
    r = SpawnFailureOutcome(req, f);
    ASSERT_FALSE(r.ok()) << step;
    EXPECT_EQ(r.error().code(), Code::kS300);
  }
}

}  // namespace
}  // namespace skiff::agent
