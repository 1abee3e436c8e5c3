// The jail backend: skiff-agent as PID 1 of a fresh set of Linux namespaces
// (user, mount, pid, ipc, uts, net, cgroup) on an overlayfs root, confined by
// seccomp, no_new_privs, rlimits and a per-sandbox cgroup. See
// docs/security.md ("Jail backend") for the threat model and the choices.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "isolation/isolator.h"
#include "isolation/jail/cgroup.h"

namespace skiff {

struct JailOptions {
  // First host uid/gid of the sandbox ranges: slot N maps root inside to
  // uid_base + N * 65536. Ranges listed in /etc/subuid|subgid are skipped.
  uint32_t uid_base = 1u << 20;
  uint32_t slots = 1024;
  // Size of the per-sandbox tmpfs holding the writable layers (MiB);
  // 0 = memory_mb.
  uint64_t upper_size_mb = 0;
  // RLIMIT_NOFILE for the agent and everything in the sandbox.
  uint64_t nofile = 65536;
};

class JailIsolator : public Isolator {
 public:
  explicit JailIsolator(JailOptions options = {});
  ~JailIsolator() override;

  std::string_view kind() const override { return "jail"; }
  Status Available() override;
  Result<std::unique_ptr<Instance>> Start(const SandboxPolicy& policy) override;
  // S300: a jail never hibernates (docs/snapshots.md).
  Result<std::unique_ptr<Instance>> Dormant(const SandboxPolicy& policy) override;
  void CleanupOrphans() override;
  nlohmann::json Doctor() override;

  struct Shared;  // state shared with live instances (uid slots)

 private:
  JailOptions options_;
  std::shared_ptr<Shared> shared_;
};

std::unique_ptr<Isolator> MakeJailIsolator();

}  // namespace skiff
