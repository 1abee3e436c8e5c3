#include "isolation/jail/rootfs_plan.h"

#include <algorithm>

namespace skiff::jail {

RootfsPlan PlanRootfs(const SandboxPolicy& policy, uint32_t uid_base, uint64_t upper_size_mb) {
  RootfsPlan plan;
  const size_t nl = policy.rootfs.layers.size();
  plan.overlays.resize(nl);
  for (size_t i = 0; i < nl; ++i) {
    const auto& l = policy.rootfs.layers[i];
    OverlayPlan& o = plan.overlays[i];
    std::string lowerdir;
    for (size_t j = 0; j < l.lower.size(); ++j) {
      o.lower_hosts.push_back(l.lower[j]);
      o.lower_names.push_back("l" + std::to_string(i) + "." + std::to_string(j));
      lowerdir += (j ? ":" : "") + o.lower_names.back();
    }
    o.mountpoint = i == 0 ? "root" : "root" + l.target;
    o.upper = "u" + std::to_string(i);
    o.work = "w" + std::to_string(i);
    o.options = "lowerdir=" + lowerdir + ",upperdir=" + o.upper + ",workdir=" + o.work;
  }
  plan.tmp_mb = policy.tmp_size_mb ? policy.tmp_size_mb : std::max<uint64_t>(policy.memory_mb / 2, 1);
  const uint64_t upper_mb = upper_size_mb ? upper_size_mb : policy.memory_mb;
  const std::string owner = ",uid=" + std::to_string(uid_base) + ",gid=" + std::to_string(uid_base);
  plan.state_opts = "size=" + std::to_string(upper_mb) + "m,mode=0700";
  plan.dev_opts = "size=64k,nr_inodes=64,mode=0755" + owner;
  plan.shm_opts = "size=" + std::to_string(plan.tmp_mb) + "m,mode=1777" + owner;
  plan.tmp_opts = plan.shm_opts;
  return plan;
}

}  // namespace skiff::jail
