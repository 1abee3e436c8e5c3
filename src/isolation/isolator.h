// The Isolator interface: the only thing a backend knows is how to start a
// skiff-agent in an isolated environment, hand back a byte channel to it,
// and stop it. Policy (what to isolate, limits) arrives as an immutable
// SandboxPolicy decided elsewhere; backends decide nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff {

namespace proto {
class Client;  // protocol/client.h: the host's end of a sandbox's agent channel
}  // namespace proto

// What a sandbox's root filesystem is made of, as resolved by images/.
struct RootfsSpec {
  // An overlay mount: the read-only lower directories (first = top) are
  // mounted at `target` (inside the sandbox) with a private writable upper.
  struct Layer {
    std::string target;              // "/" or e.g. "/usr"
    std::vector<std::string> lower;  // host directories, read-only
  };
  std::vector<Layer> layers;  // mounted in order; "/" first
  // For the microVM backend: a read-only block image of the same rootfs
  // (erofs/ext4), empty when the image has none.
  std::string block_image;
  std::string block_fstype;
};

// The validated, immutable description of one sandbox.
struct SandboxPolicy {
  std::string id;        // canonical UUID
  std::string hostname;  // inside the sandbox
  RootfsSpec rootfs;
  uint32_t cpus = 1;
  uint32_t memory_mb = 512;
  bool network = false;
  // With `network`: config network.host_ports and network.allow (docs/security.md#networking-network-true).
  std::vector<uint16_t> net_host_ports;
  std::vector<std::string> net_allow;
  uint32_t pids_max = 1024;
  uint64_t tmp_size_mb = 0;  // 0 = backend default (half the memory)
  std::string state_dir;     // host directory the backend may use for this sandbox
  // Start from a snapshot this backend saved (Instance::Snapshot) in this
  // directory instead of from the image's first state; empty: fresh.
  std::string restore_dir;
};

// What Instance::Snapshot saved.
struct SnapshotContents {
  bool memory = false;  // the processes and their memory too; else the writable layer only
  uint64_t bytes = 0;   // written under the snapshot's directory
};

// What a sandbox uses now (Instance::Usage, docs/api.md#sandboxmetrics).
struct ResourceUsage {
  uint32_t cpu_count = 0;  // CPUs the sandbox may use
  // Share of those CPUs used, 0-100 (100: all cpu_count busy), since the
  // previous Usage() of this instance, or over a short sample on the first.
  double cpu_used_pct = 0;
  uint64_t mem_used_bytes = 0;
  uint64_t mem_total_bytes = 0;   // the sandbox's memory limit
  uint64_t disk_used_bytes = 0;   // of its writable filesystems
  uint64_t disk_total_bytes = 0;  // their size
};

// One running sandbox agent.
class Instance {
 public:
  virtual ~Instance() = default;
  // The channel to the agent (the host end). Taken once.
  virtual UniqueFd TakeChannel() = 0;
  // Kills everything (SIGTERM, then SIGKILL after `grace`) and releases all
  // host resources: processes, mounts, cgroups, sockets, temp dirs.
  // Idempotent; returns when everything is released.
  virtual void Stop(std::chrono::milliseconds grace) = 0;
  // True while the sandbox's agent process (or VM) runs.
  virtual bool Running() = 0;
  // A short description of why it ended (exit status, tail of a boot log).
  virtual std::string ExitReport() = 0;
  // Facts for list/doctor: {"isolation":"jail","cgroup":true,...}.
  virtual nlohmann::json Describe() = 0;
  // Stops every process of the sandbox where it stands, memory and host
  // resources kept (the jail's cgroup freezer, the VMM's vCPUs), and lets
  // them run again. S300 naming the cause when this host cannot; a failed
  // Pause leaves the sandbox running. Stop() works on a paused sandbox.
  virtual Status Pause() = 0;
  virtual Status Resume() = 0;
  // Whether the sandbox's own clock stood still while it was paused (a VM
  // guest's does; a jail reads the host's), so the caller sets it after
  // Resume (protocol op "clock").
  virtual bool ClockStopsWhilePaused() const = 0;
  // Saves the sandbox's state into the empty directory `dir` (files 0600),
  // at most `max_bytes` (S400 beyond): memory and disk where the backend
  // can, the writable layer otherwise. The sandbox runs on afterwards (a
  // paused one stays paused). When SnapshotNeedsQuiesce(), the caller has
  // quiesced the agent channel (protocol/messages.h) for the duration.
  virtual Result<SnapshotContents> Snapshot(const std::string& dir, uint64_t max_bytes) = 0;
  virtual bool SnapshotNeedsQuiesce() const = 0;
  // Hibernation: saves the whole sandbox into `dir` as Snapshot does (the
  // caller has quiesced the channel) and frees what runs it (the VMM
  // exits); Wake starts it again from there, the same sandbox, and hands
  // back its new agent channel. S300 naming why on a backend that cannot.
  virtual Result<SnapshotContents> Hibernate(const std::string& dir, uint64_t max_bytes) = 0;
  // OK when Hibernate can be tried on this sandbox, else the S300 saying why
  // (checked before anything changes).
  virtual Status CanHibernate() = 0;
  virtual Result<UniqueFd> Wake(const std::string& dir) = 0;
  // CPU, memory and disk use now. The jail reads it from the host's side
  // (its cgroups and writable layer) and ignores `agent`; the microVM asks
  // its guest's agent over `agent` (protocol op "usage") while it runs, and
  // answers a paused VM from the sample BeforePause took. S300 naming why on
  // a backend or host that cannot tell.
  virtual Result<ResourceUsage> Usage(proto::Client& agent) = 0;
  // Called by a pause just before Pause(), while the agent still answers: a
  // backend that cannot read a paused sandbox's use takes what it needs now
  // (best effort: a failure is logged, the pause goes on).
  virtual void BeforePause(proto::Client& agent) { (void)agent; }
};

class Isolator {
 public:
  virtual ~Isolator() = default;
  virtual std::string_view kind() const = 0;  // "jail" | "microvm"
  // Whether this backend works on this host, and if not, why.
  virtual Status Available() = 0;
  // Starts the agent. On failure leaves nothing behind (S300 "boot: ...").
  virtual Result<std::unique_ptr<Instance>> Start(const SandboxPolicy& policy) = 0;
  // A sandbox an earlier daemon hibernated, saved in policy.restore_dir
  // (policy.id and hostname as when it ran): an instance in Hibernate's
  // state, not running, that Wake(policy.restore_dir) starts. Checks the
  // save against this host first. Pure virtual: each backend says.
  virtual Result<std::unique_ptr<Instance>> Dormant(const SandboxPolicy& policy) = 0;
  // Removes leftovers of earlier runs (after a daemon crash).
  virtual void CleanupOrphans() = 0;
  // doctor: per-check facts about this host.
  virtual nlohmann::json Doctor() = 0;
};

}  // namespace skiff
