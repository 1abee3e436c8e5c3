// SandboxManager: the library API of skiff (create, exec, stop, list, run,
// fs), the SandboxService over real sandboxes. A thin composition of the
// registry with its caps (registry.h), the warm pool filler (warm_pool.h),
// the reaper (reaper.h) and the agents' fs client (fs_client.h); the
// lifecycle itself (create, boot, stop, agent death, shutdown) is here,
// exec in exec.cc and run in run.cc. Transports (CLI, HTTP, iii WS) call it
// with typed, already-validated requests; it never parses JSON from
// callers. Everything it returns on failure is an Error with an S-code.
//
// It knows the isolation backends only through the Isolator interface: the
// composition root (backends.h) builds the concrete ones.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "images/catalog.h"
#include "isolation/isolator.h"
#include "sandbox/config.h"
#include "sandbox/reaper.h"
#include "sandbox/registry.h"
#include "sandbox/service.h"
#include "sandbox/snapshot_store.h"
#include "sandbox/types.h"
#include "sandbox/warm_pool.h"

namespace skiff {

// Facts about the host that only the concrete backends can establish,
// handed over by the composition root with the isolators. Each may be null.
struct HostProbes {
  std::function<bool()> kvm_usable;                // null: no usable /dev/kvm
  std::function<nlohmann::json()> network_doctor;  // null: doctor's "network" is null
  // docs/security.md#networking-network-true loopback rewrite of a create-time env value; null: unchanged.
  std::function<std::string(const std::string& value, const std::vector<uint16_t>& ports)> rewrite_loopback;
};

class SandboxManager : public SandboxService {
 public:
  // `isolators` maps "jail"/"microvm" to the backends this host offers.
  SandboxManager(Config config, std::map<std::string, std::unique_ptr<Isolator>> isolators,
                 HostProbes host = {});
  ~SandboxManager() override;  // stops every sandbox (wait) and the reaper

  Result<CreateResult> Create(const CreateSpec& spec) override;
  Result<ExecResult> Exec(const ExecSpec& spec, OutputSink* sink = nullptr) override;
  Status Stop(const std::string& sandbox_id, bool wait) override;
  Status Pause(const std::string& sandbox_id) override;      // pause.cc
  Status Resume(const std::string& sandbox_id) override;     // pause.cc
  Status Hibernate(const std::string& sandbox_id) override;  // pause.cc
  std::vector<ListEntry> List() override;
  Result<SnapshotRecord> Snapshot(const std::string& sandbox_id,
                                  const std::string& name) override;  // snapshot.cc
  Result<std::vector<CreateResult>> Fork(const std::string& sandbox_id,
                                         uint32_t count) override;  // snapshot.cc
  std::vector<SnapshotRecord> ListSnapshots() override { return snapshots_.List(); }
  Status DeleteSnapshot(const std::string& id_or_name) override { return snapshots_.Delete(id_or_name); }
  Result<SandboxMetrics> Metrics(const std::string& sandbox_id) override;  // pause.cc
  std::optional<std::string> TenantOf(const std::string& sandbox_id) override {
    return registry_.TenantOf(sandbox_id);
  }
  Result<ExecResult> Run(const RunSpec& spec, OutputSink* sink = nullptr) override;
  std::vector<CatalogEntry> CatalogList() override;

  Result<nlohmann::json> Fs(const std::string& sandbox_id, const proto::FsCall& call) override;
  Result<nlohmann::json> FsWrite(const std::string& sandbox_id, const std::string& path, uint32_t mode,
                                 bool parents, const ByteSource& source,
                                 const proto::FileMetadata& metadata) override;
  Status FsRead(const std::string& sandbox_id, const std::string& path,
                const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) override;
  Status FsWatch(const std::string& sandbox_id, const proto::FsWatchRequest& req, FsWatchSink& sink) override;
  Result<nlohmann::json> Process(const std::string& sandbox_id, const proto::ProcessCall& call) override;
  Result<proto::ProcInfo> ProcessOutput(const std::string& sandbox_id, const proto::ProcOutputRequest& req,
                                        ProcessOutputSink& sink) override;
  Result<proto::ProcInputResult> ProcessInput(const std::string& sandbox_id,
                                              const proto::ProcInputRequest& req,
                                              const ByteSource& source) override;
  Result<proto::PortConnectResult> PortRelay(const std::string& sandbox_id, uint16_t port,
                                             const ByteSource& upstream, PortSink& sink) override;

  // One reaper pass (the reaper thread calls it every 10 s).
  void ReapOnce() { reaper_.ReapOnce(); }
  // Stops everything and refuses new work; returns once creates that were
  // booting have finished and been torn down too.
  void Shutdown();

  const Config& config() const { return config_; }
  std::string default_isolation() const override { return default_isolation_; }
  std::vector<std::string> available_isolations() const override;
  nlohmann::json Doctor() override;
  std::string microvm_accel() const override;
  using Stats = SandboxStats;
  Stats& stats() override { return stats_; }

  using PoolStatus = skiff::PoolStatus;
  std::vector<PoolStatus> PoolStats() override { return registry_.PoolStats(); }
  HostFacts Host() override;
  using CreateObserver = skiff::CreateObserver;
  void SetCreateObserver(CreateObserver observer) override;

 private:
  struct BootParams {
    std::string image;
    std::string isolation;
    uint32_t cpus = 1;
    uint32_t memory_mb = 512;
    bool network = false;
    std::string restore_dir;  // a snapshot's directory, or "" (fresh)
    std::string id;           // the sandbox's id, or "" for a new random one
  };

  bool KvmUsable() const { return host_.kvm_usable && host_.kvm_usable(); }
  // Resolves the image and starts an agent under `p`; the sandbox is in no
  // registry yet. Failures leave nothing behind.
  Result<std::shared_ptr<Sandbox>> Boot(const BootParams& p);
  // Fills `sb` (its id set) from `p` and `img`; the policy to start it with.
  SandboxPolicy PrepareBoot(Sandbox& sb, const BootParams& p, const ResolvedImage& img) const;
  // At start: the sandboxes an earlier daemon hibernated are listed again,
  // paused and hibernated, under their ids (adopt.cc).
  void AdoptHibernated();
  Status AdoptOne(const SnapshotRecord& rec);
  // Arms removal on agent death (registry or pool). Call once the sandbox is
  // registered; fires at once when the agent has already died.
  void WatchAgent(const std::shared_ptr<Sandbox>& sb);
  void OnAgentDeath(const std::shared_ptr<Sandbox>& sb, const std::string& why);
  void NotifyCreated(const std::string& image, bool pooled, std::chrono::steady_clock::time_point t0);
  // Tears a sandbox taken out of the registry down on a thread of its own
  // (inline when no thread can be started) and records the end.
  // Takes the sandbox by value: the teardown thread holds the reference it
  // drops before the teardown counts as finished.
  void TeardownInBackground(std::shared_ptr<Sandbox> sb);

  std::chrono::milliseconds FsTimeout() const;
  // The sandbox for a call that needs its processes running: a paused one
  // is resumed first when it was created with auto_resume, S005 otherwise.
  Result<std::shared_ptr<Sandbox>> Running(const std::string& sandbox_id);
  // The reaper's pause of an idle sandbox created with on_idle: pause.
  void PauseIdle(const std::shared_ptr<Sandbox>& sb);
  // Saves `sb` into a new snapshot of the store (snapshot.cc).
  Result<SnapshotRecord> SaveSnapshot(const std::shared_ptr<Sandbox>& sb, const std::string& name,
                                      bool internal);
  // The record of a save of `sb` (snapshot.cc).
  static SnapshotRecord RecordOf(const Sandbox& sb, const SnapshotContents& saved, bool internal);
  // Create from a snapshot: the parameters of the boot (snapshot.cc).
  Result<SnapshotRecord> SnapshotForCreate(const CreateSpec& spec);
  // A snapshot, fork or hibernation in progress: Shutdown waits for it to
  // end (its files committed or removed) and refuses new ones.
  Result<std::shared_ptr<void>> BeginStateOp();

  Config config_;
  HostProbes host_;
  std::map<std::string, std::unique_ptr<Isolator>> isolators_;
  std::string default_isolation_;
  const std::string boot_id_ = NewUuid();  // HostFacts::boot_id
  Catalog catalog_;
  Stats stats_;
  SandboxRegistry registry_;
  SnapshotStore snapshots_;
  std::mutex observer_mu_;
  CreateObserver observer_;
  std::mutex state_ops_mu_;
  std::condition_variable state_ops_cv_;
  int state_ops_ = 0;              // guarded by state_ops_mu_
  bool state_ops_closed_ = false;  // guarded by state_ops_mu_
  // Last: their threads use everything above and end first.
  WarmPool pool_;
  Reaper reaper_;
};

}  // namespace skiff
