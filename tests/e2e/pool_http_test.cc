// The warm pool through the real `skiff serve`: GET /metrics reports the
// ready count, hits and misses and times pooled creates apart; pooled
// sandboxes stay out of sandbox::list; SIGTERM tears every one down.
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "daemon_harness.h"

namespace skiff::e2e {
namespace {

// The value of one Prometheus sample, or -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// skiff-agent processes whose parent is `ppid`.
std::set<int> AgentsOf(int ppid) {
  std::set<int> out;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string c;
    std::getline(comm, c);
    if (c != "skiff-agent") continue;
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    for (std::string l; std::getline(st, l);)
      if (l.rfind("PPid:", 0) == 0 && std::stoi(l.substr(5)) == ppid) out.insert(pid);
  }
  closedir(d);
  return out;
}

TEST(PoolHttpTest, MetricsListAndShutdown) {
  if (geteuid() != 0) GTEST_SKIP() << "the jail backend needs root on this host";
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon d("image_allowlist: [host]\nisolation: jail\npool: {host: 2}\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  const std::string ready = "skiff_pool_ready{image=\"host\"}";
  std::string m;
  for (int i = 0; i < 600 && Sample(m, ready) != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = d.Get("/metrics").body;
  }
  ASSERT_EQ(Sample(m, ready), 2) << m << d.Log();
  EXPECT_EQ(Sample(m, "skiff_pool_hits_total{image=\"host\"}"), 0);
  EXPECT_EQ(Sample(m, "skiff_pool_misses_total{image=\"host\"}"), 0);
  EXPECT_EQ(Sample(m, "skiff_sandboxes{isolation=\"jail\"}"), 0);
  EXPECT_EQ(d.Call("sandbox::list", json::object()).Json()["sandboxes"].size(), 0u);

  auto r = d.Call("sandbox::create", {{"image", "host"}, {"name", "warm"}, {"env", {{"K", "v"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string id = r.Json()["sandbox_id"];
  auto e = d.Call("sandbox::exec", {{"sandbox_id", id}, {"argv", {"/bin/sh", "-c", "echo $K"}}});
  ASSERT_EQ(e.status, 200) << e.body;
  EXPECT_EQ(e.Json()["stdout"], "v\n");
  r = d.Call("sandbox::create", {{"image", "host"}, {"memory_mb", 256}});
  ASSERT_EQ(r.status, 200) << r.body;

  auto list = d.Call("sandbox::list", json::object()).Json()["sandboxes"];
  ASSERT_EQ(list.size(), 2u) << list.dump();
  m = d.Get("/metrics").body;
  EXPECT_EQ(Sample(m, "skiff_pool_hits_total{image=\"host\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "skiff_pool_misses_total{image=\"host\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "skiff_sandbox_create_seconds_count{pooled=\"true\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "skiff_sandbox_create_seconds_count{pooled=\"false\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "skiff_sandboxes{isolation=\"jail\"}"), 2) << m;

  // Refilled: two listed, two pooled, four agents; SIGTERM ends them all.
  for (int i = 0; i < 600 && Sample(m, ready) != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = d.Get("/metrics").body;
  }
  ASSERT_EQ(Sample(m, ready), 2) << m;
  auto agents = AgentsOf(d.pid());
  EXPECT_EQ(agents.size(), 4u);
  ASSERT_EQ(d.Terminate(std::chrono::seconds(60)), 0) << d.Log();
  for (int pid : agents) EXPECT_NE(::kill(pid, 0), 0) << "agent " << pid << " survived the daemon";
  std::ifstream mounts("/proc/self/mountinfo");
  std::string all((std::istreambuf_iterator<char>(mounts)), {});
  EXPECT_EQ(all.find(id), std::string::npos) << "a mount of " << id << " survived";
}

}  // namespace
}  // namespace skiff::e2e
