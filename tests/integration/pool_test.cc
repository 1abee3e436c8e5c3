// The warm pool (docs/configuration.md#warm-pool) of SandboxManager on the jail backend: filling,
// claiming, matching, invisibility, isolation between claims, refill after
// an agent death, backoff on failing fills, and a clean shutdown.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/paths.h"
#include "footprint.h"
#include "sandbox/backends.h"

namespace skiff {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using namespace testing_support;

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the jail backend needs root on this host";
    setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
  }

  static Config BaseConfig(uint32_t pool_size) {
    Config cfg;
    cfg.allow_all_images = true;
    cfg.isolation = "jail";
    cfg.max_concurrent_sandboxes = 16;
    if (pool_size) cfg.pool["host"] = pool_size;
    return cfg;
  }

  void Start(Config cfg) {
    auto m = MakeSandboxManager(std::move(cfg));
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    mgr_ = std::move(m).value();
  }

  SandboxManager::PoolStatus Pool(const std::string& image = "host") {
    for (auto& p : mgr_->PoolStats())
      if (p.image == image) return p;
    ADD_FAILURE() << "no pool for " << image;
    return {};
  }

  // Waits until the pool of `image` holds `n` ready sandboxes.
  bool WaitReady(uint32_t n, std::chrono::seconds limit = 60s, const std::string& image = "host") {
    auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (Pool(image).ready == n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  Result<ExecResult> Sh(const std::string& id, const std::string& script) {
    ExecSpec es;
    es.sandbox_id = id;
    es.argv = {"/bin/sh", "-c", script};
    es.timeout_ms = 60000;
    return mgr_->Exec(es);
  }

  std::unique_ptr<SandboxManager> mgr_;
};

TEST_F(PoolTest, FillsToNAndAMatchingCreateClaimsThenRefills) {
  Start(BaseConfig(2));
  ASSERT_TRUE(WaitReady(2)) << "ready=" << Pool().ready;
  EXPECT_EQ(OurAgents().size(), 2u) << "the pool holds booted agents";
  // Nothing more is booted once the pool is full.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(OurAgents().size(), 2u);

  std::set<int> pooled = OurAgents();
  CreateSpec cs;
  cs.image = "host";
  auto r = mgr_->Create(cs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->isolation, "jail");
  EXPECT_EQ(Pool().hits, 1u);
  EXPECT_EQ(Pool().misses, 0u);
  auto out = Sh(r->sandbox_id, "echo claimed; touch /tmp/claimed-marker");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out->stdout_text, "claimed\n");
  // A claim hands over a booted sandbox, it does not boot one: the agent
  // serving the claimed sandbox is one of those pooled before the create.
  int serving = 0;
  for (int pid : OurAgents())
    if (::access(("/proc/" + std::to_string(pid) + "/root/tmp/claimed-marker").c_str(), F_OK) == 0)
      serving = pid;
  ASSERT_NE(serving, 0) << "no agent of ours serves the claimed sandbox";
  EXPECT_TRUE(pooled.count(serving)) << "the claimed sandbox's agent " << serving
                                     << " was booted by the create";
  // A fresh boot of a shape the pool does not hold.
  CreateSpec fresh_spec;
  fresh_spec.image = "host";
  fresh_spec.memory_mb = 256;
  auto fresh = mgr_->Create(fresh_spec);
  ASSERT_TRUE(fresh.ok()) << fresh.error().ToString();

  ASSERT_TRUE(WaitReady(2)) << "the pool refills in the background";
  EXPECT_EQ(OurAgents().size(), 4u);
  EXPECT_EQ(Pool().fill_failures, 0u);
}

TEST_F(PoolTest, NonMatchingCreateBootsFresh) {
  Start(BaseConfig(1));
  ASSERT_TRUE(WaitReady(1));
  auto before = OurAgents();
  for (auto tweak : {0, 1, 2}) {
    CreateSpec cs;
    cs.image = "host";
    if (tweak == 0) cs.memory_mb = 256;
    if (tweak == 1) cs.cpus = 2;
    if (tweak == 2) cs.network = true;
    auto r = mgr_->Create(cs);
    if (tweak == 2 && !r.ok()) continue;  // a host without networking support
    ASSERT_TRUE(r.ok()) << tweak << ": " << r.error().ToString();
    auto list = mgr_->List();
    auto it = std::find_if(list.begin(), list.end(), [&](auto& e) { return e.sandbox_id == r->sandbox_id; });
    ASSERT_NE(it, list.end());
    if (tweak == 0) {
      EXPECT_EQ(it->memory_mb, 256u);
    } else if (tweak == 1) {
      EXPECT_EQ(it->cpus, 2u);
    } else {
      EXPECT_TRUE(it->network);
    }
  }
  auto p = Pool();
  EXPECT_EQ(p.hits, 0u);
  EXPECT_GE(p.misses, 2u);
  EXPECT_EQ(p.ready, 1u) << "the pooled sandbox stays unclaimed";
  for (int pid : before) EXPECT_TRUE(OurAgents().count(pid)) << "the pooled agent is still there";
}

TEST_F(PoolTest, NameEnvAndIdleTimeoutApplyAtClaimAndClocksStartThen) {
  Start(BaseConfig(1));
  ASSERT_TRUE(WaitReady(1));
  std::this_thread::sleep_for(1200ms);  // the pooled sandbox has aged
  CreateSpec cs;
  cs.image = "host";
  cs.name = "claimed-one";
  cs.env = {{"GREETING", "hello"}, {"HOME", "/tmp"}};
  cs.idle_timeout_secs = 0;
  auto r = mgr_->Create(cs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(Pool().hits, 1u);
  auto list = mgr_->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].sandbox_id, r->sandbox_id);
  EXPECT_EQ(list[0].name, std::optional<std::string>("claimed-one"));
  EXPECT_EQ(list[0].age_secs, 0) << "created_at starts at claim";
  EXPECT_EQ(list[0].cpus, 1u);
  EXPECT_EQ(list[0].memory_mb, 512u);
  EXPECT_FALSE(list[0].network);
  auto out = Sh(r->sandbox_id, "echo \"$GREETING $HOME\"");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out->stdout_text, "hello /tmp\n");
  // idle_timeout_secs 0 was applied: the claimed sandbox is reaped, the
  // pooled replacement is not.
  ASSERT_TRUE(WaitReady(1));
  std::this_thread::sleep_for(20ms);
  mgr_->ReapOnce();
  EXPECT_TRUE(mgr_->List().empty());
  EXPECT_EQ(Pool().ready, 1u);
}

TEST_F(PoolTest, PooledSandboxesAreInvisibleUnreapedAndOutsideTheCap) {
  Config cfg = BaseConfig(3);
  cfg.max_concurrent_sandboxes = 2;
  cfg.default_idle_timeout_secs = 0;  // everything idle is reapable at once
  Start(cfg);
  ASSERT_TRUE(WaitReady(3));
  EXPECT_TRUE(mgr_->List().empty()) << "pooled sandboxes are not listed";
  std::this_thread::sleep_for(20ms);
  mgr_->ReapOnce();
  EXPECT_EQ(Pool().ready, 3u) << "pooled sandboxes are not reaped";

  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    CreateSpec cs;
    cs.image = "host";
    cs.idle_timeout_secs = 600;
    auto r = mgr_->Create(cs);
    ASSERT_TRUE(r.ok()) << "three pooled sandboxes do not use up a cap of two: " << r.error().ToString();
    ids.push_back(r->sandbox_id);
  }
  CreateSpec cs;
  cs.image = "host";
  auto third = mgr_->Create(cs);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code(), Code::kS400);
  EXPECT_EQ(mgr_->List().size(), 2u);
  // A pooled sandbox's id is unknown to every call until it is claimed.
  ASSERT_TRUE(WaitReady(3));
  std::set<std::string> listed;
  for (auto& e : mgr_->List()) listed.insert(e.sandbox_id);
  EXPECT_EQ(listed, std::set<std::string>(ids.begin(), ids.end()));
}

TEST_F(PoolTest, AClaimedSandboxsWritesNeverReachAnotherPooledOne) {
  Start(BaseConfig(2));
  ASSERT_TRUE(WaitReady(2));
  CreateSpec cs;
  cs.image = "host";
  auto a = mgr_->Create(cs);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto w = Sh(a->sandbox_id,
              "echo secret > /usr/pool-probe && echo x > /tmp/pool-probe && "
              "echo y > /etc/pool-probe && cat /usr/pool-probe");
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  ASSERT_EQ(w->stdout_text, "secret\n") << w->stderr_text;
  struct stat st;
  EXPECT_NE(stat("/usr/pool-probe", &st), 0) << "a sandbox write reached the host";
  const std::string check =
      "for f in /usr/pool-probe /tmp/pool-probe /etc/pool-probe; do test -e $f && echo leaked $f; done; echo "
      "done";
  // The sandbox booted alongside it, and the one booted after it stopped.
  auto b = mgr_->Create(cs);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(mgr_->Stop(a->sandbox_id, true).ok());
  ASSERT_TRUE(WaitReady(2));
  auto c = mgr_->Create(cs);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Pool().hits, 3u);
  for (auto& id : {b->sandbox_id, c->sandbox_id}) {
    auto r = Sh(id, check);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->stdout_text, "done\n");
  }
}

TEST_F(PoolTest, RunClaimsFromThePool) {
  Start(BaseConfig(1));
  ASSERT_TRUE(WaitReady(1));
  RunSpec rs;
  rs.create.image = "host";
  rs.lang = "sh";
  rs.code = "echo $((6 * 7))";
  auto r = mgr_->Run(rs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "42\n");
  EXPECT_EQ(Pool().hits, 1u);
  EXPECT_TRUE(mgr_->List().empty()) << "run stops what it claimed";
  ASSERT_TRUE(WaitReady(1));
}

TEST_F(PoolTest, APooledAgentThatDiesIsReplacedNotClaimed) {
  Start(BaseConfig(1));
  ASSERT_TRUE(WaitReady(1));
  auto agents = OurAgents();
  ASSERT_EQ(agents.size(), 1u);
  int dead = *agents.begin();
  ASSERT_EQ(kill(dead, SIGKILL), 0);
  // The dead one leaves the pool and a new one takes its place.
  auto end = Clock::now() + 60s;
  while (Clock::now() < end) {
    auto now = OurAgents();
    if (now.size() == 1 && !now.count(dead) && Pool().ready == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  auto now = OurAgents();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_FALSE(now.count(dead));
  ASSERT_EQ(Pool().ready, 1u);
  CreateSpec cs;
  cs.image = "host";
  auto r = mgr_->Create(cs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto out = Sh(r->sandbox_id, "echo alive");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out->stdout_text, "alive\n");
  EXPECT_EQ(Pool().fill_failures, 0u);
}

TEST_F(PoolTest, AFailingFillIsRetriedWithBackoffWithoutSpinning) {
  auto dir = std::filesystem::temp_directory_path() / ("skiff-pool-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Config cfg = BaseConfig(1);
  cfg.custom_images["broken"] = (dir / "missing-image.tar").string();
  cfg.pool["broken"] = 1;
  cfg.images_dir = (dir / "images").string();
  Start(cfg);
  ASSERT_TRUE(WaitReady(1)) << "a failing pool does not hold up another";
  // Attempts at about 0 s, 1 s and 3 s (backoff 1 s, then 2 s, then 4 s).
  auto t0 = Clock::now();
  while (Clock::now() - t0 < 3500ms) std::this_thread::sleep_for(50ms);
  auto p = Pool("broken");
  EXPECT_GE(p.fill_failures, 2u) << "a failed fill is retried";
  EXPECT_LE(p.fill_failures, 4u) << "retries back off";
  EXPECT_EQ(p.ready, 0u);
  CreateSpec cs;
  cs.image = "broken";
  auto r = mgr_->Create(cs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS102) << r.error().ToString();
  EXPECT_EQ(Pool("broken").misses, 1u);
  mgr_.reset();
  std::filesystem::remove_all(dir);
}

TEST_F(PoolTest, ShutdownLeavesNothingBehind) {
  // Warm up lazily created state (runtime dirs, caches) before counting.
  Start(BaseConfig(1));
  ASSERT_TRUE(WaitReady(1));
  mgr_.reset();
  Footprint before = Measure();

  // A full pool with one claimed sandbox, then a shutdown mid-refill.
  Start(BaseConfig(3));
  ASSERT_TRUE(WaitReady(3));
  CreateSpec cs;
  cs.image = "host";
  auto r = mgr_->Create(cs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_TRUE(Sh(r->sandbox_id, "echo x > /tmp/f").ok());
  mgr_->Shutdown();
  EXPECT_TRUE(OurAgents().empty()) << "Shutdown returns after every pooled agent is gone";
  mgr_.reset();
  // Shutdown right after start, while the first fills are booting.
  Start(BaseConfig(3));
  mgr_.reset();
  Footprint after = Measure();
  EXPECT_EQ(before, after) << "before: " << before.str() << "\nafter:  " << after.str();
}

}  // namespace
}  // namespace skiff
