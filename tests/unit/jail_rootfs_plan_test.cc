// The jail's filesystem plan, computed from a policy without root.
#include <gtest/gtest.h>

#include "isolation/jail/rootfs_plan.h"

namespace skiff::jail {
namespace {

SandboxPolicy TwoLayers() {
  SandboxPolicy p;
  p.rootfs.layers = {{"/", {"/img/top", "/img/base"}}, {"/usr", {"/host/usr"}}};
  p.memory_mb = 512;
  return p;
}

TEST(RootfsPlan, OverlaysInPolicyOrderWithNumberedLowers) {
  RootfsPlan plan = PlanRootfs(TwoLayers(), 1u << 20, 0);
  ASSERT_EQ(plan.overlays.size(), 2u);
  const OverlayPlan& root = plan.overlays[0];
  EXPECT_EQ(root.mountpoint, "root");
  EXPECT_EQ(root.upper, "u0");
  EXPECT_EQ(root.work, "w0");
  EXPECT_EQ(root.lower_hosts, (std::vector<std::string>{"/img/top", "/img/base"}));
  EXPECT_EQ(root.lower_names, (std::vector<std::string>{"l0.0", "l0.1"}));
  EXPECT_EQ(root.options, "lowerdir=l0.0:l0.1,upperdir=u0,workdir=w0");
  const OverlayPlan& usr = plan.overlays[1];
  EXPECT_EQ(usr.mountpoint, "root/usr");
  EXPECT_EQ(usr.lower_names, (std::vector<std::string>{"l1.0"}));
  EXPECT_EQ(usr.options, "lowerdir=l1.0,upperdir=u1,workdir=w1");
}

TEST(RootfsPlan, TmpfsSizesAndOwners) {
  SandboxPolicy p = TwoLayers();
  RootfsPlan plan = PlanRootfs(p, 1048576, 0);
  EXPECT_EQ(plan.tmp_mb, 256u);                       // half the memory by default
  EXPECT_EQ(plan.state_opts, "size=512m,mode=0700");  // upper = memory_mb
  EXPECT_EQ(plan.dev_opts, "size=64k,nr_inodes=64,mode=0755,uid=1048576,gid=1048576");
  EXPECT_EQ(plan.shm_opts, "size=256m,mode=1777,uid=1048576,gid=1048576");
  EXPECT_EQ(plan.tmp_opts, plan.shm_opts);

  p.tmp_size_mb = 64;
  p.memory_mb = 1;
  plan = PlanRootfs(p, 7, 100);
  EXPECT_EQ(plan.tmp_mb, 64u);
  EXPECT_EQ(plan.state_opts, "size=100m,mode=0700");
  EXPECT_EQ(plan.tmp_opts, "size=64m,mode=1777,uid=7,gid=7");
  p.tmp_size_mb = 0;
  EXPECT_EQ(PlanRootfs(p, 7, 0).tmp_mb, 1u);  // never 0 (tmpfs would be unlimited)
}

}  // namespace
}  // namespace skiff::jail
