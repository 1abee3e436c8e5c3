// End-to-end behaviour of SandboxManager on the jail backend: the library
// API that the CLI, the HTTP API and the iii transport all call.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/paths.h"
#include "footprint.h"
#include "sandbox/backends.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

using namespace testing_support;

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the jail backend needs root on this host";
    setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    Config cfg;
    cfg.allow_all_images = true;
    cfg.isolation = "jail";
    cfg.max_concurrent_sandboxes = 64;
    auto m = MakeSandboxManager(cfg);
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    mgr_ = std::move(m).value();
  }

  std::string Create(CreateSpec cs = {}) {
    if (cs.image.empty()) cs.image = "host";
    auto r = mgr_->Create(cs);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? r->sandbox_id : "";
  }

  Result<ExecResult> Sh(const std::string& id, const std::string& script, uint64_t timeout_ms = 60000) {
    ExecSpec es;
    es.sandbox_id = id;
    es.argv = {"/bin/sh", "-c", script};
    es.timeout_ms = timeout_ms;
    return mgr_->Exec(es);
  }

  std::unique_ptr<SandboxManager> mgr_;
};

TEST_F(SandboxTest, RunPythonPrints42) {
  RunSpec rs;
  rs.create.image = "host";
  rs.lang = "python";
  rs.code = "print(6*7)";
  auto r = mgr_->Run(rs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "42\n");
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->sandbox_id.has_value());
}

TEST_F(SandboxTest, IsolationFacts) {
  std::string id = Create();
  char host[256];
  gethostname(host, sizeof host);
  auto r = Sh(id, "hostname; cat /proc/1/comm; ls /proc | grep -c '^[0-9]'; id -u");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::istringstream lines(r->stdout_text);
  std::string hostname, pid1, nprocs, uid;
  std::getline(lines, hostname);
  std::getline(lines, pid1);
  std::getline(lines, nprocs);
  std::getline(lines, uid);
  EXPECT_NE(hostname, host);
  EXPECT_EQ(pid1, "skiff-agent");
  EXPECT_LT(std::stoi(nprocs), 8) << "host processes must be invisible";
  EXPECT_EQ(uid, "0");
}

TEST_F(SandboxTest, WritesStayPrivateAndDieWithTheSandbox) {
  std::string a = Create(), b = Create();
  auto w = Sh(a, "echo secret > /usr/skiff-probe && echo x > /etc/skiff-probe && cat /usr/skiff-probe");
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_EQ(w->exit_code, 0) << w->stderr_text;
  EXPECT_EQ(w->stdout_text, "secret\n");
  struct stat st;
  EXPECT_NE(stat("/usr/skiff-probe", &st), 0) << "a sandbox write reached the host";
  auto r = Sh(b, "test -e /usr/skiff-probe && echo leaked || echo clean");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_text, "clean\n");
  ASSERT_TRUE(mgr_->Stop(a, true).ok());
  std::string c = Create();
  r = Sh(c, "test -e /usr/skiff-probe && echo leaked || echo clean");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_text, "clean\n");
}

TEST_F(SandboxTest, ExitCodesAndSignals) {
  std::string id = Create();
  auto r = Sh(id, "exit 7");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 7);
  r = Sh(id, "kill -9 $$");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 137);
  ExecSpec es;
  es.sandbox_id = id;
  es.argv = {"definitely-not-a-command"};
  r = mgr_->Exec(es);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_EQ(r->stderr_text, "exec: definitely-not-a-command: not found\n");
}

TEST_F(SandboxTest, StdinAndEnvLayers) {
  CreateSpec cs;
  cs.image = "host";
  cs.env = {{"A", "create"}, {"B", "create"}};
  std::string id = Create(cs);
  ExecSpec es;
  es.sandbox_id = id;
  es.argv = {"/bin/sh", "-c", "cat; echo \"$A $B $HOME\""};
  es.env = {{"B", "exec"}};
  es.stdin_bytes = "from stdin\n";
  auto r = mgr_->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "from stdin\ncreate exec /root\n");
}

TEST_F(SandboxTest, TimeoutIsS200WithPartialOutput) {
  std::string id = Create();
  auto r = Sh(id, "echo started; sleep 30", 500);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS200);
  EXPECT_EQ(r.error().message(), "exec timed out after 500 ms");
  ASSERT_TRUE(r.error().details().has_value());
  EXPECT_EQ((*r.error().details())["stdout"], "started\n");
}

TEST_F(SandboxTest, ZeroTimeoutIsS200WithoutRunning) {
  std::string id = Create();
  auto r = Sh(id, "touch /tmp/ran", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS200);
  auto chk = Sh(id, "test -e /tmp/ran && echo ran || echo not");
  ASSERT_TRUE(chk.ok());
  EXPECT_EQ(chk->stdout_text, "not\n");
}

TEST_F(SandboxTest, HugeStdoutIsTruncatedNotFatal) {
  std::string id = Create();
  auto r = Sh(id, "head -c 100000000 /dev/zero | tr '\\0' x; echo done >&2");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_EQ(r->stdout_text.size(), 1u << 20);
  EXPECT_EQ(r->stderr_text, "done\n");
  EXPECT_EQ(r->exit_code, 0);
}

TEST_F(SandboxTest, ForkBombAndMemoryHogAndDiskFillEndCleanly) {
  std::string bomb = Create(), other = Create();
  auto r = Sh(bomb, "b() { b | b & }; b; sleep 2; echo survived", 20000);
  // Whatever the bomb's own result, the agent and the other sandbox live on.
  auto ok = Sh(other, "echo alive");
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_EQ(ok->stdout_text, "alive\n");
  ASSERT_TRUE(mgr_->Stop(bomb, true).ok());

  CreateSpec cs;
  cs.image = "host";
  cs.memory_mb = 128;
  std::string hog = Create(cs);
  r = Sh(hog, "python3 -c 'x = bytearray(1 << 30); print(len(x))'");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_NE(r->exit_code, 0) << "a 1 GiB allocation must not succeed under a 128 MiB limit";

  std::string disk = Create();
  r = Sh(disk, "dd if=/dev/zero of=/tmp/big bs=1M count=10240 2>&1; echo rc=$?", 120000);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_NE(r->stdout_text.find("No space left on device"), std::string::npos) << r->stdout_text;
  ok = Sh(other, "echo still alive");
  ASSERT_TRUE(ok.ok());
}

TEST_F(SandboxTest, StopMidExecIsS004AndLaterCallsS002) {
  std::string id = Create();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_TRUE(mgr_->Stop(id, false).ok());
  });
  auto r = Sh(id, "echo begun; sleep 30");
  stopper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS004);
  auto again = Sh(id, "true");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kS002);
  for (auto& e : mgr_->List()) EXPECT_NE(e.sandbox_id, id);
}

TEST_F(SandboxTest, AgentKilledFromHostIsS300ThenS002) {
  auto before = Pids();
  std::string id = Create();
  int agent = 0;
  for (int p : Pids())
    if (!before.count(p) && Comm(p) == "skiff-agent") agent = p;
  ASSERT_GT(agent, 0);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(agent, SIGKILL);
  });
  auto r = Sh(id, "sleep 30");
  killer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300) << r.error().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto again = Sh(id, "true");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kS002);
}

TEST_F(SandboxTest, ExecConcurrencyCapIsS003) {
  std::string id = Create();
  std::vector<std::thread> ts;
  std::atomic<int> running{0};
  for (int i = 0; i < 4; ++i) ts.emplace_back([&] { (void)Sh(id, "sleep 2"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto r = Sh(id, "true");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS003);
  for (auto& t : ts) t.join();
  (void)running;
}

TEST_F(SandboxTest, SandboxCapIsAtomicUnderConcurrentCreates) {
  mgr_.reset();
  Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = "jail";
  cfg.max_concurrent_sandboxes = 8;
  mgr_ = std::move(MakeSandboxManager(cfg)).value();
  std::atomic<int> ok{0}, s400{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 32; ++i)
    ts.emplace_back([&] {
      CreateSpec cs;
      cs.image = "host";
      auto r = mgr_->Create(cs);
      if (r.ok())
        ++ok;
      else if (r.error().code() == Code::kS400)
        ++s400;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(s400.load(), 24);
  EXPECT_EQ(mgr_->List().size(), 8u);
}

TEST_F(SandboxTest, IdleSandboxIsReaped) {
  CreateSpec cs;
  cs.image = "host";
  cs.idle_timeout_secs = 0;
  std::string id = Create(cs);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  mgr_->ReapOnce();
  auto r = Sh(id, "true");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS002);
}

std::string StateOf(SandboxManager& m, const std::string& id) {
  for (const auto& e : m.List())
    if (e.sandbox_id == id) return e.state;
  return "absent";
}

TEST_F(SandboxTest, PauseStopsEveryProcessAndResumeContinuesThem) {
  std::string id = Create();
  // A background writer of nanosecond timestamps, 20 a second.
  auto bg = Sh(id, "(while :; do date +%s%N >> /tmp/ticks; sleep 0.05; done) >/dev/null 2>&1 & echo $!");
  ASSERT_TRUE(bg.ok()) << bg.error().ToString();
  std::string pid = bg->stdout_text.substr(0, bg->stdout_text.find('\n'));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(mgr_->Pause(id).ok());
  EXPECT_EQ(StateOf(*mgr_, id), "paused");
  auto again = mgr_->Pause(id);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kS006);
  auto during = Sh(id, "true");
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.error().code(), Code::kS005) << during.error().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(mgr_->Resume(id).ok());
  EXPECT_EQ(StateOf(*mgr_, id), "running");
  auto twice = mgr_->Resume(id);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code(), Code::kS006);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // The same process runs on, and its timestamps have one gap: the pause.
  auto alive = Sh(id, "kill -0 " + pid + " && echo alive");
  ASSERT_TRUE(alive.ok());
  EXPECT_EQ(alive->stdout_text, "alive\n");
  auto ticks = Sh(id, "cat /tmp/ticks");
  ASSERT_TRUE(ticks.ok());
  std::istringstream in(ticks->stdout_text);
  int64_t prev = 0, t = 0, widest = 0, after = 0;
  while (in >> t) {
    if (prev) {
      widest = std::max(widest, t - prev);
      if (widest >= 1'200'000'000) ++after;
    }
    prev = t;
  }
  EXPECT_GE(widest, 1'200'000'000) << ticks->stdout_text;  // nothing ran while paused
  EXPECT_GE(after, 2) << ticks->stdout_text;               // and it ticks again after
}

// A jail's snapshot is its files (docs/snapshots.md): a sandbox created from
// it has them (deletions, owners, modes, links, fifos, /tmp), chains of
// snapshots stack, forks are independent copies, a snapshot in use cannot
// be deleted, and nothing is left once they are gone.
TEST_F(SandboxTest, SnapshotsAndForksCarryTheFilesAndLeaveNothing) {
  TempDir root("snaps");
  Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = "jail";
  cfg.snapshot_dir = root / "store";
  mgr_.reset();
  auto m = MakeSandboxManager(cfg);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  mgr_ = std::move(m).value();

  std::string id = Create();
  auto made =
      Sh(id,
         "mkdir -p /work && echo hello > /work/a && chown 1000:1000 /work/a && chmod 640 /work/a && "
         "ln -s /work/a /work/link && mkfifo /work/fifo && rm /usr/bin/yes && rm -r /usr/share/doc/bash && "
         "mkdir /usr/share/doc/bash && echo fresh > /usr/share/doc/bash/only && echo t > /tmp/t");
  ASSERT_TRUE(made.ok() && made->exit_code == 0) << (made.ok() ? made->stderr_text : made.error().ToString());
  auto snap = mgr_->Snapshot(id, "s1");
  ASSERT_TRUE(snap.ok()) << snap.error().ToString();
  EXPECT_FALSE(snap->memory);
  EXPECT_EQ(snap->image, "host");
  EXPECT_EQ(snap->isolation, "jail");
  auto again = mgr_->Snapshot(id, "s1");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kS001) << "names are unique";
  ASSERT_TRUE(Sh(id, "echo changed > /work/a").ok());

  const std::string check =
      "cat /work/a; test -e /usr/bin/yes && echo has || echo gone; ls -A /usr/share/doc/bash; cat /tmp/t; "
      "readlink /work/link; "
      "stat -c %u:%g:%a /work/a; test -p /work/fifo && echo fifo";
  CreateSpec from;
  from.snapshot = "s1";
  auto c = mgr_->Create(from);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  auto got = Sh(c->sandbox_id, check);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stdout_text, "hello\ngone\nonly\nt\n/work/a\n1000:1000:640\nfifo\n") << got->stderr_text;
  auto busy = mgr_->DeleteSnapshot("s1");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), Code::kS008);
  CreateSpec wrong = from;
  wrong.image = "python";
  auto refused = mgr_->Create(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kS001);
  CreateSpec missing;
  missing.snapshot = "nope";
  auto unknown = mgr_->Create(missing);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), Code::kS007);

  // A snapshot of the copy stacks on its source's.
  ASSERT_TRUE(Sh(c->sandbox_id, "echo two > /work/b && rm /work/link").ok());
  auto s2 = mgr_->Snapshot(c->sandbox_id, "s2");
  ASSERT_TRUE(s2.ok()) << s2.error().ToString();
  CreateSpec from2;
  from2.snapshot = s2->snapshot_id;
  auto c2 = mgr_->Create(from2);
  ASSERT_TRUE(c2.ok()) << c2.error().ToString();
  auto got2 = Sh(c2->sandbox_id, "cat /work/a /work/b; test -L /work/link && echo link || echo nolink");
  ASSERT_TRUE(got2.ok());
  EXPECT_EQ(got2->stdout_text, "hello\ntwo\nnolink\n");

  // Forks: the source's current state, each its own.
  auto forks = mgr_->Fork(id, 2);
  ASSERT_TRUE(forks.ok()) << forks.error().ToString();
  ASSERT_EQ(forks->size(), 2u);
  ASSERT_TRUE(Sh((*forks)[0].sandbox_id, "echo mine > /work/a").ok());
  auto f1 = Sh((*forks)[1].sandbox_id, "cat /work/a");
  ASSERT_TRUE(f1.ok());
  EXPECT_EQ(f1->stdout_text, "changed\n");
  EXPECT_EQ(mgr_->ListSnapshots().size(), 2u) << "a fork's own snapshot is not listed";

  for (const auto& f : *forks) ASSERT_TRUE(mgr_->Stop(f.sandbox_id, true).ok());
  ASSERT_TRUE(mgr_->Stop(c2->sandbox_id, true).ok());
  ASSERT_TRUE(mgr_->Stop(c->sandbox_id, true).ok());
  ASSERT_TRUE(mgr_->Stop(id, true).ok());
  ASSERT_TRUE(mgr_->DeleteSnapshot("s1").ok());
  ASSERT_TRUE(mgr_->DeleteSnapshot(s2->snapshot_id).ok());
  auto gone = mgr_->DeleteSnapshot("s1");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Code::kS007);
  EXPECT_TRUE(mgr_->ListSnapshots().empty());
  DIR* d = ::opendir(cfg.snapshot_dir.c_str());
  ASSERT_NE(d, nullptr);
  int left = 0;
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++left;
  ::closedir(d);
  EXPECT_EQ(left, 0) << "every snapshot's files are gone, the fork's included";
  mgr_.reset();  // before `root` goes
}

TEST_F(SandboxTest, AStopOfAPausedSandboxKillsItAndLeavesNothing) {
  auto before = Pids();
  std::string id = Create();
  ASSERT_TRUE(Sh(id, "sleep 600 >/dev/null 2>&1 &").ok());
  ASSERT_TRUE(mgr_->Pause(id).ok());
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(mgr_->Stop(id, true).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(StateOf(*mgr_, id), "absent");
  for (int p : Pids()) {
    if (!before.count(p)) {
      EXPECT_NE(Comm(p), "skiff-agent") << p;
    }
  }
  DIR* d = opendir(("/sys/fs/cgroup/freezer/skiff/" + id).c_str());
  EXPECT_EQ(d, nullptr) << "the sandbox's freezer cgroup is left";
  if (d) closedir(d);
}

TEST_F(SandboxTest, AnIdleSandboxIsPausedAndACallResumesIt) {
  CreateSpec cs;
  cs.image = "host";
  cs.idle_timeout_secs = 0;
  cs.pause_on_idle = true;
  cs.auto_resume = true;
  std::string id = Create(cs);
  ASSERT_TRUE(Sh(id, "echo kept > /tmp/state").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  mgr_->ReapOnce();
  EXPECT_EQ(StateOf(*mgr_, id), "paused");
  auto r = Sh(id, "cat /tmp/state");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "kept\n");
  EXPECT_EQ(StateOf(*mgr_, id), "running");
}

TEST_F(SandboxTest, NoTraceAfter200RunsAnd16Concurrent) {
  // Warm up lazily created state (caches, runtime dirs) before counting.
  {
    RunSpec rs;
    rs.create.image = "host";
    rs.lang = "sh";
    rs.code = "true";
    ASSERT_TRUE(mgr_->Run(rs).ok());
  }
  mgr_.reset();
  SetUp();
  Footprint before = Measure();
  for (int i = 0; i < 200; ++i) {
    RunSpec rs;
    rs.create.image = "host";
    rs.lang = "sh";
    rs.code = "echo $((" + std::to_string(i) + " + 1))";
    auto r = mgr_->Run(rs);
    ASSERT_TRUE(r.ok()) << i << ": " << r.error().ToString();
    ASSERT_EQ(r->stdout_text, std::to_string(i + 1) + "\n");
  }
  std::vector<std::string> ids(16);
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; ++i) ts.emplace_back([&, i] { ids[i] = Create(); });
  for (auto& t : ts) t.join();
  for (auto& id : ids) {
    auto r = Sh(id, "echo ok");
    ASSERT_TRUE(r.ok());
  }
  for (auto& id : ids) ASSERT_TRUE(mgr_->Stop(id, false).ok());
  mgr_.reset();  // waits for background teardowns
  SetUp();
  Footprint after = Measure();
  EXPECT_EQ(before, after) << "before: " << before.str() << "\nafter:  " << after.str();
}

}  // namespace
}  // namespace skiff
