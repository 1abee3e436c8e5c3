// The host helpers of src/base, without root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/child_report.h"
#include "base/error.h"
#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/find_executable.h"
#include "base/json_limits.h"
#include "base/log.h"
#include "base/pidfd.h"
#include "base/scoped_dir.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "base/thread.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

class InTempDir : public ::testing::Test {
 protected:
  testing_support::TempDir tmp_{"base-test"};
  std::string dir_ = tmp_.path();
};

using FileIo = InTempDir;

TEST_F(FileIo, WriteThenReadRoundTrips) {
  std::string p = dir_ + "/f";
  ASSERT_TRUE(WriteFile(p, std::string("a\0b", 3)).ok());
  auto r = ReadFile(p);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, std::string("a\0b", 3));
  ASSERT_TRUE(WriteFile(p, "x").ok());  // truncates
  EXPECT_EQ(*ReadFile(p), "x");
}

TEST_F(FileIo, ReadRefusesOversizeMissingAndSymlinks) {
  std::string p = dir_ + "/big";
  ASSERT_TRUE(WriteFile(p, std::string(100, 'z')).ok());
  EXPECT_TRUE(ReadFile(p, 100).ok());
  auto big = ReadFile(p, 99);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), Code::kS300);
  EXPECT_NE(big.error().message().find("EFBIG"), std::string::npos) << big.error().message();
  EXPECT_NE(ReadFile(dir_ + "/missing").error().message().find("ENOENT"), std::string::npos);
  ASSERT_EQ(::symlink(p.c_str(), (dir_ + "/link").c_str()), 0);
  auto link = ReadFile(dir_ + "/link");
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().message().find("ELOOP"), std::string::npos) << link.error().message();
  auto followed = ReadFile(dir_ + "/link", 100, Links::kFollow);
  ASSERT_TRUE(followed.ok()) << followed.error().ToString();
  EXPECT_EQ(followed->size(), 100u);
}

TEST_F(FileIo, AtomicWriteReplacesAndLeavesNoTemporary) {
  std::string p = dir_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(p, "old", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(p, "new", 0600).ok());
  EXPECT_EQ(*ReadFile(p), "new");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto d = ScopedDir::Open(dir_);
  ASSERT_TRUE(d.ok());
  int n = 0;
  while (const dirent* e = d->Next()) {
    EXPECT_STREQ(e->d_name, "state.json");
    ++n;
  }
  EXPECT_EQ(n, 1);
  // Into a missing directory: an error naming the call, nothing created.
  auto bad = WriteFileAtomic(dir_ + "/no/such/file", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("mkostemp"), std::string::npos) << bad.error().message();
}

TEST_F(FileIo, MakeDirsCreatesEachComponentAndRefusesAFileInTheWay) {
  std::string p = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(p, 0700).ok());
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(MakeDirs(p).ok());  // already there
  ASSERT_TRUE(WriteFile(dir_ + "/file", "").ok());
  auto r = MakeDirs(dir_ + "/file/sub");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("ENOTDIR"), std::string::npos) << r.error().message();
}

TEST_F(FileIo, WriteKnobNeverCreatesAndNamesTheValueOnFailure) {
  std::string p = dir_ + "/knob";
  auto missing = WriteKnob(p, "1");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("ENOENT"), std::string::npos) << missing.error().message();
  EXPECT_FALSE(ReadFile(p).ok());  // not created
  ASSERT_TRUE(WriteFile(p, "old value").ok());
  ASSERT_TRUE(WriteKnob(p, "42").ok());
  EXPECT_EQ(*ReadFile(p), "42d value");  // one write at offset 0, no truncation, as a knob takes it
  auto full = WriteKnob("/dev/full", "x");
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message().find("/dev/full <- x"), std::string::npos) << full.error().message();
}

using FindExecutableTest = InTempDir;

TEST_F(FindExecutableTest, SearchesThePathInOrderAndSkipsNonExecutables) {
  ASSERT_TRUE(MakeDirs(dir_ + "/one").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/two").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/two/tool.d").ok());
  ASSERT_TRUE(WriteFile(dir_ + "/one/tool", "#!/bin/sh\n", 0644).ok());  // not executable
  ASSERT_TRUE(WriteFile(dir_ + "/two/tool", "#!/bin/sh\n", 0755).ok());
  std::string path = ":" + dir_ + "/one:" + dir_ + "/two";
  EXPECT_EQ(FindExecutable("tool", path), dir_ + "/two/tool");
  EXPECT_EQ(FindExecutable("tool.d", path), std::nullopt);  // a directory
  EXPECT_EQ(FindExecutable("absent", path), std::nullopt);
  EXPECT_EQ(FindExecutable("", path), std::nullopt);
  EXPECT_EQ(FindExecutable(dir_ + "/two/tool", ""), dir_ + "/two/tool");
  EXPECT_EQ(FindExecutable(dir_ + "/one/tool", ""), std::nullopt);
  // An empty component never means the current directory.
  ASSERT_EQ(::chdir((dir_ + "/two").c_str()), 0);
  EXPECT_EQ(FindExecutable("tool", ":"), std::nullopt);
  ASSERT_EQ(::chdir("/"), 0);
}

TEST_F(FileIo, ReadFileTailKeepsTheEndAndRefusesSymlinks) {
  std::string p = dir_ + "/log";
  ASSERT_TRUE(WriteFile(p, "0123456789").ok());
  auto tail = ReadFileTail(p, 4);
  ASSERT_TRUE(tail.ok()) << tail.error().ToString();
  EXPECT_EQ(*tail, "6789");
  EXPECT_EQ(*ReadFileTail(p, 100), "0123456789");
  EXPECT_EQ(*ReadFileTail(p, 0), "");
  ASSERT_EQ(::symlink(p.c_str(), (dir_ + "/link").c_str()), 0);
  auto link = ReadFileTail(dir_ + "/link", 4);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().message().find("ELOOP"), std::string::npos) << link.error().message();
  EXPECT_FALSE(ReadFileTail(dir_ + "/missing", 4).ok());
}

TEST_F(FileIo, MakeDirsWithModeSetsTheLastComponentsModeWhateverTheUmask) {
  std::string p = dir_ + "/a/b";
  mode_t old = ::umask(077);
  Status st = MakeDirsWithMode(p, 0711);
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  struct stat sb {};
  ASSERT_EQ(::stat(p.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0711u);
  // An existing directory gets the mode too.
  ASSERT_EQ(::chmod(p.c_str(), 0700), 0);
  ASSERT_TRUE(MakeDirsWithMode(p, 0755).ok());
  ASSERT_EQ(::stat(p.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0755u);
}

TEST_F(FileIo, MakeDirsRefusingLinksStopsAtASymlinkToADirectory) {
  ASSERT_EQ(::mkdir((dir_ + "/real").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_TRUE(MakeDirs(dir_ + "/link/sub").ok());  // kFollow: the link is a directory
  Status refused = MakeDirs(dir_ + "/link", 0755, Links::kRefuse);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "mkdir(" + dir_ + "/link): ENOTDIR");
  Status below = MakeDirs(dir_ + "/link/other", 0755, Links::kRefuse);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(::access((dir_ + "/real/other").c_str(), F_OK), -1);
  EXPECT_TRUE(MakeDirs(dir_ + "/real/x/y", 0755, Links::kRefuse).ok());
}

TEST(ChildReport, ARecordedFailureNamesTheCallTheObjectAndTheErrno) {
  ChildFailure f;
  RecordChildFailure(&f, ENOENT, "execve", "/usr/bin/qemu");
  EXPECT_EQ(ChildFailureError(f).message(), "execve(/usr/bin/qemu): ENOENT");
  EXPECT_EQ(ChildFailureError(f, "vmm setup").message(), "vmm setup: execve(/usr/bin/qemu): ENOENT");
  EXPECT_EQ(ChildFailureError(f).code(), Code::kS300);
  // Cut to the record's size, never overrun; errno 0 still reads as a failure.
  std::string long_object(500, 'o');
  RecordChildFailure(&f, 0, "a-call-name-much-longer-than-the-slot-holds", long_object.c_str());
  EXPECT_NE(f.err, 0);
  EXPECT_EQ(std::string(f.call).size(), sizeof f.call - 1);
  EXPECT_EQ(std::string(f.object).size(), sizeof f.object - 1);
  RecordChildFailure(nullptr, EPERM, "x", "y");  // no slot: nothing to do
}

TEST(ChildReport, ThePipeReadsAReportAsAnErrorAndAnExecAsSuccess) {
  {
    auto pipe = ChildReportPipe::Create();
    ASSERT_TRUE(pipe.ok());
    EXPECT_TRUE(::fcntl(pipe->write_fd(), F_GETFD) & FD_CLOEXEC);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ReportChildFailure(pipe->write_fd(), EACCES, "mount", "/proc");
    Status st = pipe->Read("jail setup");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(), "jail setup: mount(/proc): EACCES");
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFEXITED(ws));
    EXPECT_EQ(WEXITSTATUS(ws), 127);
  }
  {
    auto pipe = ChildReportPipe::Create();
    ASSERT_TRUE(pipe.ok());
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const char* argv[] = {"/bin/true", nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ReportChildFailure(pipe->write_fd(), errno, "execv", argv[0]);
    }
    Status st = pipe->Read("spawn");
    EXPECT_TRUE(st.ok()) << st.error().ToString();
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  }
  {
    // A child that dies halfway through its record: a short report, not
    // success.
    auto pipe = ChildReportPipe::Create();
    ASSERT_TRUE(pipe.ok());
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ssize_t n = ::write(pipe->write_fd(), "abc", 3);
      ::_exit(n == 3 ? 1 : 2);
    }
    Status st = pipe->Read("spawn");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("short report"), std::string::npos) << st.error().message();
    ::waitpid(pid, nullptr, 0);
  }
}

TEST(JsonLimits, ADeeplyNestedDocumentIsRefusedUnparsed) {
  // 400,000 levels: what a hostile agent sent to overflow the daemon's stack.
  std::string bomb = "{\"a\":" + std::string(400000, '[') + std::string(400000, ']') + "}";
  EXPECT_TRUE(ParseJsonBounded(bomb).is_discarded());
  EXPECT_TRUE(ParseJsonBounded(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'))
                  .is_discarded());
  auto ok = ParseJsonBounded(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'));
  EXPECT_FALSE(ok.is_discarded());
  // Brackets inside strings do not count; malformed text is discarded too.
  auto s = ParseJsonBounded("{\"k\":\"" + std::string(1000, '[') + "\"}");
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["k"].get<std::string>().size(), 1000u);
  EXPECT_TRUE(ParseJsonBounded("{\"a\":").is_discarded());
}

TEST(ErrorWith, AddsContextAndKeepsTheCode) {
  Error e = Error::Sys(Code::kS216, "open", "/x", ENOENT).With("while reading the config");
  EXPECT_EQ(e.code(), Code::kS216);
  EXPECT_EQ(e.message(), "while reading the config: open(/x): ENOENT");
  e.With("outer");
  EXPECT_EQ(e.message(), "outer: while reading the config: open(/x): ENOENT");
}

TEST(FdPairTest, PipeCarriesBytesAndIsCloseOnExec) {
  auto p = MakePipe();
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(::fcntl(p->first.get(), F_GETFD) & FD_CLOEXEC);
  ASSERT_EQ(::write(p->second.get(), "hi", 2), 2);
  char buf[2];
  ASSERT_EQ(::read(p->first.get(), buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
  auto s = MakeSocketPair();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(::write(s->first.get(), "x", 1), 1);
  ASSERT_EQ(::read(s->second.get(), buf, 1), 1);
}

TEST(SpawnTest, RunsAProgramWithTheGivenDescriptorsAndReportsItsStatus) {
  auto out = MakePipe();
  ASSERT_TRUE(out.ok());
  std::vector<std::string> env = {"GREETING=hello"};
  SpawnOptions o;
  o.stdout_fd = out->second.get();
  o.env = &env;
  auto p = Spawn({"sh", "-c", "echo $GREETING; exit 7"}, o);
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  out->second.reset();
  auto st = p->Wait(std::nullopt);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->has_value());
  EXPECT_TRUE(WIFEXITED(**st));
  EXPECT_EQ(WEXITSTATUS(**st), 7);
  char buf[16];
  ssize_t n = ::read(out->first.get(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "hello\n");
  auto missing = Spawn({"skiff-no-such-program"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("ENOENT"), std::string::npos);
}

TEST(ProcessTerminate, EscalatesToKillAfterTheGrace) {
  // Ignores SIGTERM: only the SIGKILL after the grace ends it.
  auto p = Spawn({"sh", "-c", "trap '' TERM; while :; do sleep 1; done"});
  ASSERT_TRUE(p.ok());
  ::usleep(100 * 1000);  // let the shell install its trap
  auto t0 = std::chrono::steady_clock::now();
  auto st = p->Terminate(std::chrono::milliseconds(200));
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  EXPECT_TRUE(WIFSIGNALED(*st));
  EXPECT_EQ(WTERMSIG(*st), SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  // A process that honours SIGTERM ends with it, before the grace.
  auto q = Spawn({"sleep", "30"});
  ASSERT_TRUE(q.ok());
  auto st2 = q->Terminate(std::chrono::seconds(10));
  ASSERT_TRUE(st2.ok());
  EXPECT_TRUE(WIFSIGNALED(*st2));
  EXPECT_EQ(WTERMSIG(*st2), SIGTERM);
}

TEST(Thread, AnExceptionEndsOnlyItsThread) {
  std::atomic<bool> after{false};
  auto t = StartThread("test thrower", [] { throw std::runtime_error("boom"); });
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  t->join();  // the process is still here: std::terminate was not called
  auto u = StartThread("test worker", [&] { after = true; });
  ASSERT_TRUE(u.ok());
  u->join();
  EXPECT_TRUE(after);
}

TEST(Thread, NoThreadToBeHadIsAnErrorNotAnException) {
  // In a child, cap the address space just above what it uses: a new
  // thread's stack cannot be mapped, and std::thread would throw.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long vm_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmSize:", 0) == 0) vm_kb = std::strtol(line.c_str() + 7, nullptr, 10);
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(vm_kb + 1024) * 1024;
    if (vm_kb == 0 || ::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    // The first threads may reuse stacks glibc cached from earlier tests;
    // keep them running until one needs a fresh mapping.
    static std::atomic<bool> release{false};
    for (int i = 0; i < 64; ++i) {
      auto t = StartThread("capped", [] {
        while (!release) ::usleep(1000);
      });
      if (t.ok()) {
        t->detach();
        continue;
      }
      bool named =
          t.error().ToString().find("capped") != std::string::npos && t.error().code() == Code::kS300;
      ::_exit(named ? 0 : 1);
    }
    ::_exit(2);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST(LogRateLimit, AllowsABurstPerIntervalAndCountsWhatItRefused) {
  using Clock = log::RateLimit::Clock;
  log::RateLimit rl(3, std::chrono::seconds(10));
  Clock::time_point t0 = Clock::now();
  uint64_t supp = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(rl.Allow(t0 + std::chrono::milliseconds(i), &supp));
    EXPECT_EQ(supp, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(rl.Allow(t0 + std::chrono::seconds(5), &supp));
  // The next window: one line, saying how many were left out.
  ASSERT_TRUE(rl.Allow(t0 + std::chrono::seconds(11), &supp));
  EXPECT_EQ(supp, 1000u);
  ASSERT_TRUE(rl.Allow(t0 + std::chrono::seconds(12), &supp));
  EXPECT_EQ(supp, 0u);
}

TEST(LogRateLimit, EachCallSiteHasItsOwnBudget) {
  // SKIFF_LOG_LIMITED evaluates its stream only when the line is written.
  int a = 0, b = 0;
  for (int i = 0; i < 100; ++i) {
    SKIFF_LOG_LIMITED(Error) << "site a " << ++a;
    SKIFF_LOG_LIMITED(Error) << "site b " << ++b;
  }
  EXPECT_EQ(a, static_cast<int>(log::kLimitedBurst));
  EXPECT_EQ(b, static_cast<int>(log::kLimitedBurst));
}

TEST(Base64, EncodeIsRfc4648AndRoundTrips) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto back = Base64Decode(Base64Encode(all.substr(0, n)));
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, all.substr(0, n));
  }
}

}  // namespace
}  // namespace skiff
