// One sandbox must never take the daemon down (docs/architecture.md#concurrency), through
// the real `skiff serve` on both backends: a sandbox whose agent never
// answers (its processes stopped with SIGSTOP, as a hung or hostile agent
// would be) holds only its own lane. Its calls fail with S200 at
// fs_timeout_ms, calls beyond max_calls_per_sandbox fail at once with
// S003, another sandbox is served meanwhile, /healthz answers, and
// sandbox::stop ends the stuck sandbox within a bound.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "daemon_harness.h"

namespace skiff::e2e {
namespace {

using Clock = std::chrono::steady_clock;

int ParentOf(int pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  for (std::string l; std::getline(st, l);)
    if (l.rfind("PPid:", 0) == 0) return std::stoi(l.substr(5));
  return -1;
}

// Every process below `root` (children, grandchildren, ...).
std::set<int> DescendantsOf(int root) {
  std::vector<std::pair<int, int>> all;  // pid, ppid
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid > 0) all.emplace_back(pid, ParentOf(pid));
  }
  closedir(d);
  std::set<int> out = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (auto [pid, ppid] : all)
      if (out.count(ppid) && out.insert(pid).second) grew = true;
  }
  out.erase(root);
  return out;
}

// Running or stopped, not a zombie.
bool Alive(int pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(st, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class StuckSandboxTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StuckSandboxTest, AStuckAgentHoldsOnlyItsOwnLane) {
  if (geteuid() != 0) GTEST_SKIP() << "the backends need root on this host";
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const std::string iso = GetParam();
  Daemon d("image_allowlist: [base]\nisolation: " + iso +
           "\nfs_timeout_ms: 6000\nmax_calls_per_sandbox: 3\nmax_concurrent_exec_per_sandbox: 4\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  auto make = [&] {
    auto r = d.Call("sandbox::create", {{"image", "base"}, {"isolation", iso}});
    EXPECT_EQ(r.status, 200) << r.body << d.Log();
    return r.Json().value("sandbox_id", std::string());
  };
  std::set<int> before = DescendantsOf(d.pid());
  std::string stuck = make();
  ASSERT_FALSE(stuck.empty());
  std::set<int> procs;
  for (int p : DescendantsOf(d.pid()))
    if (!before.count(p)) procs.insert(p);
  ASSERT_FALSE(procs.empty());
  std::string healthy = make();
  ASSERT_FALSE(healthy.empty());
  // Both answer before the stuck one is frozen.
  ASSERT_EQ(d.Call("sandbox::fs::stat", {{"sandbox_id", stuck}, {"path", "/"}}).status, 200);

  for (int p : procs) ::kill(p, SIGSTOP);

  // Three calls fill the stuck sandbox's lane and wait on its agent.
  std::vector<std::future<std::pair<Http, double>>> waiting;
  auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(std::async(std::launch::async, [&, t0] {
      Http r = d.Call("sandbox::fs::stat", {{"sandbox_id", stuck}, {"path", "/"}});
      return std::make_pair(r, Since(t0));
    }));
  }
  // Until all three are in the lane (/healthz counts the calls running).
  for (int i = 0; i < 100 && d.Get("/healthz").Json()["calls"].value("running", 0) < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Whether the stuck calls still wait: what follows happens while they do
  // (their deadline is 6 s away), not after them.
  auto still_waiting = [&] {
    for (auto& f : waiting)
      if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return false;
    return true;
  };
  // A fourth is refused at once.
  Http refused = d.Call("sandbox::fs::ls", {{"sandbox_id", stuck}, {"path", "/"}});
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.Json().value("code", ""), "S003") << refused.body;
  EXPECT_TRUE(still_waiting()) << "the refusal waited for the stuck lane";
  // The other sandbox is served meanwhile, and so is /healthz.
  Http ok = d.Call("sandbox::exec", {{"sandbox_id", healthy}, {"cmd", "echo served"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json().value("stdout", ""), "served\n");
  EXPECT_TRUE(still_waiting()) << "the healthy sandbox waited for the stuck one's lane";
  Http health = d.Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_GE(health.Json()["calls"].value("threads", 0), 3) << health.body;
  // The waiting calls end at the host-side deadline with S200.
  for (auto& f : waiting) {
    auto [r, secs] = f.get();
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_EQ(r.Json().value("code", ""), "S200") << r.body;
    EXPECT_GE(secs, 5.9);
    EXPECT_LT(secs, 20.0);
  }
  // Stop ends the frozen sandbox within a bound, whatever its agent does.
  auto t3 = Clock::now();
  Http stopped = d.Call("sandbox::stop", {{"sandbox_id", stuck}, {"wait", true}});
  EXPECT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_LT(Since(t3), 15.0);
  for (int i = 0; i < 100; ++i) {  // reaping may trail the answer briefly
    bool any = false;
    for (int p : procs) any = any || Alive(p);
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int p : procs) EXPECT_FALSE(Alive(p)) << "process " << p << " of the stopped sandbox";
  EXPECT_EQ(d.Call("sandbox::fs::stat", {{"sandbox_id", stuck}, {"path", "/"}}).Json().value("code", ""),
            "S002");
  EXPECT_EQ(
      d.Call("sandbox::exec", {{"sandbox_id", healthy}, {"cmd", "echo still"}}).Json().value("stdout", ""),
      "still\n");
  EXPECT_EQ(d.Call("sandbox::stop", {{"sandbox_id", healthy}, {"wait", true}}).status, 200);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

INSTANTIATE_TEST_SUITE_P(Backends, StuckSandboxTest, ::testing::Values("jail", "microvm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace skiff::e2e
