// The snapshot template store's lock protocol on a temporary directory: no
// VM, no root.
#include "isolation/microvm/template_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "base/file_io.h"
#include "support/temp_dir.h"

namespace skiff::microvm {
namespace {

class TemplateStoreTest : public ::testing::Test {
 protected:
  bool Exists(const std::string& rel) const { return ::access((root_ + "/" + rel).c_str(), F_OK) == 0; }
  static Status WriteState(const std::string& dir) { return WriteFile(dir + "/state", "stream"); }
  testing_support::TempDir tmp_{"template-store"};
  std::string root_ = tmp_ / "snapshots";  // created by the store
};

TEST_F(TemplateStoreTest, BuildsOnceThenReusesTheTemplate) {
  TemplateStore store(root_);
  int builds = 0;
  auto build = [&](const std::string& dir) {
    ++builds;
    // The build writes into a temporary directory, never into the final one.
    EXPECT_NE(dir, store.Dir("key1"));
    EXPECT_NE(dir.find("key1.tmp"), std::string::npos);
    return WriteState(dir);
  };
  bool built = false;
  {
    auto lease = store.Acquire("key1", build, &built);
    ASSERT_TRUE(lease.ok()) << lease.error().ToString();
    EXPECT_TRUE(built);
    EXPECT_EQ(lease->dir(), store.Dir("key1"));
    EXPECT_EQ(*ReadFile(lease->dir() + "/state"), "stream");
  }
  auto again = store.Acquire("key1", build, &built);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(built);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(store.List(), std::vector<std::string>{"key1"});
}

TEST_F(TemplateStoreTest, AFailedBuildLeavesNothingAndIsReturnedAsItIs) {
  TemplateStore store(root_);
  auto lease = store.Acquire("k2", [](const std::string& dir) {
    EXPECT_TRUE(WriteFile(dir + "/state", "half").ok());
    return Status(Platform("snapshot", "migration failed"));
  });
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.error().message(), "platform failure: snapshot: migration failed");
  EXPECT_FALSE(Exists("k2"));
  EXPECT_FALSE(Exists("k2.tmp" + std::to_string(::getpid())));
  // A build that writes no state is a failure too.
  auto empty = store.Acquire("k3", [](const std::string&) { return OkStatus(); });
  ASSERT_FALSE(empty.ok());
  EXPECT_FALSE(Exists("k3"));
  EXPECT_TRUE(store.List().empty());
}

TEST_F(TemplateStoreTest, ConcurrentAcquiresBuildOnce) {
  TemplateStore store(root_);
  std::atomic<int> builds{0};
  auto build = [&](const std::string& dir) {
    ++builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // others wait on the lock
    return WriteState(dir);
  };
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; i++)
    threads.emplace_back([&] {
      if (store.Acquire("k", build).ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  EXPECT_EQ(ok.load(), 4);
}

TEST_F(TemplateStoreTest, DiscardRemovesTheTemplateOnlyWhenNoOneElseHoldsIt) {
  TemplateStore store(root_);
  auto a = store.Acquire("k", WriteState);
  ASSERT_TRUE(a.ok());
  auto b = store.Acquire("k", WriteState);
  ASSERT_TRUE(b.ok());
  a->Discard();
  EXPECT_TRUE(Exists("k/state"));  // b still restores from it
  b->Discard();
  EXPECT_FALSE(Exists("k"));
  // Rebuilt on the next acquire.
  bool built = false;
  ASSERT_TRUE(store.Acquire("k", WriteState, &built).ok());
  EXPECT_TRUE(built);
}

TEST_F(TemplateStoreTest, PruneKeepsTheNewestAndSkipsBusyTemplates) {
  for (const char* k : {"old", "mid", "new"}) ASSERT_TRUE(TemplateStore(root_).Acquire(k, WriteState).ok());
  TemplateStore store(root_, /*max_templates=*/2);
  // Last use by the state file's atime.
  auto age = [&](const char* k, time_t ago) {
    timespec ts[2] = {{::time(nullptr) - ago, 0}, {::time(nullptr) - ago, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/" + k + "/state").c_str(), ts, 0), 0);
  };
  age("old", 300);
  age("mid", 200);
  age("new", 100);
  // Leftovers of interrupted builds and a directory without a state.
  ASSERT_EQ(::mkdir((root_ + "/dead.tmp123").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((root_ + "/nostate").c_str(), 0700), 0);
  {
    // "old" is in use: a restore holds it, so pruning skips it.
    auto busy = store.Acquire("old", WriteState);
    ASSERT_TRUE(busy.ok());
    store.Prune("");
    EXPECT_TRUE(Exists("old/state"));
    EXPECT_FALSE(Exists("dead.tmp123"));
    EXPECT_FALSE(Exists("nostate"));
  }
  store.Prune("");
  EXPECT_FALSE(Exists("old"));
  EXPECT_FALSE(Exists("old.lock"));
  EXPECT_TRUE(Exists("mid/state"));
  EXPECT_TRUE(Exists("new/state"));
  // `keep` is never pruned, even past the cap.
  TemplateStore one(root_, /*max_templates=*/1);
  one.Prune("mid");
  EXPECT_TRUE(Exists("mid/state"));
  EXPECT_TRUE(Exists("new/state"));
  one.Prune("");
  EXPECT_FALSE(Exists("mid"));
  EXPECT_TRUE(Exists("new/state"));
}

}  // namespace
}  // namespace skiff::microvm
