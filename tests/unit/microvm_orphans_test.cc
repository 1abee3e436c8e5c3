// Owner tags and the stale state directory sweep of the microVM backend, on
// a temporary directory: no VM, no root. (The VMM kill scan is exercised by
// the integration tests: here it could reach other users' VMs.)
#include "isolation/microvm/orphans.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/file_io.h"
#include "isolation/microvm/vm_launch.h"
#include "support/temp_dir.h"

namespace skiff::microvm {
namespace {

TEST(OwnerTag, NamesThisProcessUntilItIsGone) {
  std::string self = SelfOwnerTag();
  EXPECT_EQ(self.rfind(std::to_string(::getpid()) + ":", 0), 0u) << self;
  EXPECT_FALSE(OwnerGone(self));
  // The same pid with another start time is a reused pid: gone.
  EXPECT_TRUE(OwnerGone(std::to_string(::getpid()) + ":1"));
  EXPECT_TRUE(OwnerGone("garbage"));
  EXPECT_TRUE(OwnerGone("0:5"));
  EXPECT_TRUE(OwnerGone(""));
}

TEST(OwnerTag, IsFoundInAnEnvironImage) {
  std::string env("PATH=/usr/bin\0SKIFF_VM_OWNER=12:345\0SKIFF_VM_ID=a", 49);
  EXPECT_EQ(OwnerTagFromEnviron(env), "12:345");
  EXPECT_EQ(OwnerTagFromEnviron(std::string("SKIFF_VM_OWNER_X=1\0HOME=/", 25)), "");
  EXPECT_EQ(OwnerTagFromEnviron(""), "");
}

TEST(StaleStateDirs, RemovesOnlyThoseWhoseOwnerIsGoneOrThatWereAbandoned) {
  testing_support::TempDir dir("orphans-test");
  const std::string& root = dir.path();
  auto vm = [&](const std::string& name, const std::string* owner) {
    ASSERT_EQ(::mkdir((root + "/" + name).c_str(), 0700), 0);
    if (owner) {
      ASSERT_TRUE(WriteFile(root + "/" + name + "/" + kOwnerFile, *owner + "\n").ok());
    }
  };
  std::string self = SelfOwnerTag(), gone = std::to_string(::getpid()) + ":1";
  vm("mine", &self);
  vm("orphan", &gone);
  vm("creating", nullptr);
  RemoveStaleStateDirs(root);
  EXPECT_EQ(::access((root + "/mine").c_str(), F_OK), 0);
  EXPECT_NE(::access((root + "/orphan").c_str(), F_OK), 0);
  EXPECT_EQ(::access((root + "/creating").c_str(), F_OK), 0);  // young: being created
  RemoveStaleStateDirs(root, /*abandoned_after_s=*/-1);
  EXPECT_NE(::access((root + "/creating").c_str(), F_OK), 0);
  EXPECT_EQ(::access((root + "/mine").c_str(), F_OK), 0);
}

// A directory still being created names its owner: one whose creator died
// goes at once, however young; one of a live creator stays.
TEST(StaleStateDirs, ADirectoryBeingCreatedGoesAtOnceWhenItsCreatorIsGone) {
  testing_support::TempDir dir("orphans-test");
  const std::string& root = dir.path();
  std::string gone = std::to_string(::getpid()) + ":1";
  std::string dead = root + "/" + CreatingDirName(gone, "vm-a");
  std::string live = root + "/" + CreatingDirName(SelfOwnerTag(), "vm-b");
  ASSERT_EQ(::mkdir(dead.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(live.c_str(), 0700), 0);
  RemoveStaleStateDirs(root);  // both are young
  EXPECT_NE(::access(dead.c_str(), F_OK), 0);
  EXPECT_EQ(::access(live.c_str(), F_OK), 0);
}

// A directory being removed names its owner too: killed half-way through
// (the owner file already gone), a dead remover's goes at once, a live
// one's stays. Removing one goes through that name and leaves nothing.
TEST(StaleStateDirs, ADirectoryBeingRemovedNamesItsOwner) {
  testing_support::TempDir dir("orphans-test");
  const std::string& root = dir.path();
  std::string gone = std::to_string(::getpid()) + ":1";
  EXPECT_EQ(OwnerFromDirName(RemovingDirName(gone, "vm-a")), gone);
  EXPECT_EQ(OwnerFromDirName(CreatingDirName(gone, "vm-a")), gone);
  EXPECT_EQ(OwnerFromDirName("vm-a"), "");
  std::string dead = root + "/" + RemovingDirName(gone, "vm-a");
  std::string live = root + "/" + RemovingDirName(SelfOwnerTag(), "vm-b");
  ASSERT_EQ(::mkdir(dead.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(live.c_str(), 0700), 0);
  RemoveStaleStateDirs(root);
  EXPECT_NE(::access(dead.c_str(), F_OK), 0);
  EXPECT_EQ(::access(live.c_str(), F_OK), 0);
  std::string vm = root + "/vm-c";
  ASSERT_EQ(::mkdir(vm.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((vm + "/vmm-root").c_str(), 0700), 0);
  RemoveStateDir(vm);
  EXPECT_NE(::access(vm.c_str(), F_OK), 0);
  EXPECT_NE(::access((root + "/" + RemovingDirName(SelfOwnerTag(), "vm-c")).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace skiff::microvm
