// TenantScope: the SandboxService as one tenant sees it
// (docs/configuration.md#tenants). With tenancy on, every caller's calls go
// through the scope of its API key: what it creates is recorded as its own,
// it lists only its own sandboxes, and any call naming a sandbox of another
// tenant fails with the S002 of an unknown id (SandboxNotFound), before the
// call reaches the sandbox. Everything else passes through unchanged.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/service.h"

namespace skiff {

class TenantScope : public SandboxService {
 public:
  // `inner` must outlive the scope.
  TenantScope(SandboxService& inner, std::string tenant) : inner_(inner), tenant_(std::move(tenant)) {}

  const std::string& tenant() const { return tenant_; }

  Result<CreateResult> Create(const CreateSpec& spec) override;
  Result<ExecResult> Exec(const ExecSpec& spec, OutputSink* sink = nullptr) override;
  Status Stop(const std::string& sandbox_id, bool wait) override;
  Status Pause(const std::string& sandbox_id) override;
  Status Resume(const std::string& sandbox_id) override;
  Status Hibernate(const std::string& sandbox_id) override;
  Result<SnapshotRecord> Snapshot(const std::string& sandbox_id, const std::string& name) override;
  Result<std::vector<CreateResult>> Fork(const std::string& sandbox_id, uint32_t count) override;
  std::vector<SnapshotRecord> ListSnapshots() override;
  Status DeleteSnapshot(const std::string& id_or_name) override;
  Result<SandboxMetrics> Metrics(const std::string& sandbox_id) override;
  std::vector<ListEntry> List() override;
  std::optional<std::string> TenantOf(const std::string& sandbox_id) override;
  Result<ExecResult> Run(const RunSpec& spec, OutputSink* sink = nullptr) override;
  std::vector<CatalogEntry> CatalogList() override { return inner_.CatalogList(); }

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

  nlohmann::json Doctor() override { return inner_.Doctor(); }
  std::string default_isolation() const override { return inner_.default_isolation(); }
  std::vector<std::string> available_isolations() const override { return inner_.available_isolations(); }
  std::string microvm_accel() const override { return inner_.microvm_accel(); }
  SandboxStats& stats() override { return inner_.stats(); }
  std::vector<PoolStatus> PoolStats() override { return inner_.PoolStats(); }
  HostFacts Host() override { return inner_.Host(); }
  void SetCreateObserver(CreateObserver observer) override { inner_.SetCreateObserver(std::move(observer)); }

 private:
  // OK when `sandbox_id` is this tenant's; else the S002 of an unknown id.
  // Ids are never reused, so a sandbox found to be ours stays ours for the
  // call that follows.
  Status Own(const std::string& sandbox_id);

  SandboxService& inner_;
  const std::string tenant_;
};

}  // namespace skiff
