// Per-sandbox cgroups for the jail backend.
//
// The hierarchy is detected once: cgroup v2 when a cgroup2 mount offers the
// memory and pids controllers below the daemon's own cgroup, otherwise the
// cgroup v1 memory/pids hierarchies (cpu, freezer and cpuacct when mounted). Sandboxes live in
// <hierarchy>/<daemon's cgroup>/skiff/<sandbox-id>, i.e. nested under the
// daemon, so whatever limits the daemon itself runs under also bound them.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::jail {

struct CgroupLimits {
  uint64_t memory_bytes = 0;
  uint32_t pids_max = 0;
  uint32_t cpus = 0;
};

// One sandbox's cgroup directories (one per v1 controller, or one v2 dir).
class SandboxCgroup {
 public:
  SandboxCgroup() = default;
  SandboxCgroup(SandboxCgroup&&) noexcept = default;
  SandboxCgroup& operator=(SandboxCgroup&&) noexcept = default;
  ~SandboxCgroup() { Remove(); }

  bool active() const { return !dirs_.empty(); }
  const std::vector<std::string>& dirs() const { return dirs_; }
  // Open cgroup.procs files the child writes "0" into (before exec).
  std::vector<int> procs_fds() const;
  void CloseSetupFds();

  // Whether Freeze() can work: a v1 freezer hierarchy, or cgroup v2.
  bool can_freeze() const { return !freeze_knob_.empty(); }
  // Stops every process of the cgroup and returns once all are stopped (v1
  // freezer.state FROZEN, v2 cgroup.events "frozen 1"); S300 (and thawed
  // again) when that does not happen within `timeout`.
  Status Freeze(std::chrono::milliseconds timeout);
  Status Thaw();

  // Memory in use (page cache and tmpfs files included) and the limit, in
  // bytes: v1 memory.usage_in_bytes/limit_in_bytes, v2 memory.current/max.
  // S300 without a memory cgroup.
  Result<std::pair<uint64_t, uint64_t>> Memory() const;
  // CPU time the cgroup's processes used, in ns (v1 cpuacct.usage, v2
  // cpu.stat usage_usec); S300 without a cpuacct (v1) hierarchy.
  Result<uint64_t> CpuNanos() const;

  // SIGKILLs whatever is still in the cgroup (thawing it, so the kill is
  // delivered), waits for it to empty and removes the directories.
  // Idempotent.
  void Remove();

 private:
  friend class Cgroups;
  std::vector<std::string> dirs_;
  std::vector<UniqueFd> procs_;
  std::string freeze_knob_;  // <dir>/freezer.state (v1) or <dir>/cgroup.freeze (v2)
  bool v2_ = false;
  std::string memory_dir_;   // "" without one
  std::string cpuacct_dir_;  // v1 cpuacct (or the v2 dir); "" without one
};

class Cgroups {
 public:
  enum class Kind { kNone, kV1, kV2 };
  // Detects the usable hierarchy (creating the skiff/ parent directories).
  static Cgroups Detect();

  Kind kind() const { return kind_; }
  std::string_view kind_name() const;
  // Why there is no usable hierarchy (kNone), for doctor.
  const std::string& why_none() const { return why_; }
  nlohmann::json Describe() const;

  // Creates <base>/<id> in every hierarchy with the limits applied.
  Result<SandboxCgroup> Create(const std::string& id, const CgroupLimits& limits) const;

  // The skiff/ parent directories (for orphan cleanup).
  const std::vector<std::string>& bases() const { return bases_; }
  // Whether a sandbox's cgroup can be frozen (pause): v1 with a freezer, or v2.
  bool can_freeze() const { return kind_ == Kind::kV2 || (kind_ == Kind::kV1 && !freezer_base_.empty()); }

 private:
  Kind kind_ = Kind::kNone;
  std::vector<std::string> bases_;  // v1: memory, pids[, cpu][, freezer][, cpuacct]; v2: one
  bool memsw_ = false;
  std::string freezer_base_;  // v1: the freezer base among bases_, "" without one
  std::string cpuacct_base_;  // v1: the cpuacct base among bases_ (maybe the cpu one), "" without one
  std::string why_;
};

// Thaws <dir> when it is a frozen freezer (v1) or v2 cgroup; a no-op
// otherwise. A frozen process cannot act on SIGKILL until thawed.
void ThawCgroupDir(const std::string& dir);

// Kills every process listed in <dir>/cgroup.procs and removes <dir>.
// Returns false when the directory could not be removed.
bool KillAndRemoveCgroup(const std::string& dir);

}  // namespace skiff::jail
