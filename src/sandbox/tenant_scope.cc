#include "sandbox/tenant_scope.h"

#include <algorithm>

namespace skiff {

Status TenantScope::Own(const std::string& sandbox_id) {
  // An unknown id and another tenant's get the same answer from the same
  // place, after the same one lookup.
  std::optional<std::string> owner = inner_.TenantOf(sandbox_id);
  if (!owner || *owner != tenant_) return SandboxNotFound(sandbox_id);
  return OkStatus();
}

Result<CreateResult> TenantScope::Create(const CreateSpec& spec) {
  CreateSpec owned = spec;
  owned.tenant = tenant_;
  return inner_.Create(owned);
}

Result<ExecResult> TenantScope::Run(const RunSpec& spec, OutputSink* sink) {
  RunSpec owned = spec;
  owned.create.tenant = tenant_;
  return inner_.Run(owned, sink);
}

std::vector<ListEntry> TenantScope::List() {
  std::vector<ListEntry> all = inner_.List();
  std::erase_if(all, [this](const ListEntry& e) { return e.tenant != tenant_; });
  return all;
}

std::optional<std::string> TenantScope::TenantOf(const std::string& sandbox_id) {
  std::optional<std::string> owner = inner_.TenantOf(sandbox_id);
  if (owner && *owner != tenant_) return std::nullopt;
  return owner;
}

Result<ExecResult> TenantScope::Exec(const ExecSpec& spec, OutputSink* sink) {
  SKIFF_RETURN_IF_ERROR(Own(spec.sandbox_id));
  return inner_.Exec(spec, sink);
}

Status TenantScope::Stop(const std::string& sandbox_id, bool wait) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Stop(sandbox_id, wait);
}

Status TenantScope::Pause(const std::string& sandbox_id) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Pause(sandbox_id);
}

Status TenantScope::Resume(const std::string& sandbox_id) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Resume(sandbox_id);
}

Status TenantScope::Hibernate(const std::string& sandbox_id) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Hibernate(sandbox_id);
}

Result<SnapshotRecord> TenantScope::Snapshot(const std::string& sandbox_id, const std::string& name) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Snapshot(sandbox_id, name);
}

Result<SandboxMetrics> TenantScope::Metrics(const std::string& sandbox_id) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Metrics(sandbox_id);
}

Result<std::vector<CreateResult>> TenantScope::Fork(const std::string& sandbox_id, uint32_t count) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Fork(sandbox_id, count);
}

std::vector<SnapshotRecord> TenantScope::ListSnapshots() {
  std::vector<SnapshotRecord> all = inner_.ListSnapshots();
  std::erase_if(all, [this](const SnapshotRecord& r) { return r.tenant != tenant_; });
  return all;
}

Status TenantScope::DeleteSnapshot(const std::string& id_or_name) {
  // Another tenant's snapshot is as unknown as a missing one (names are
  // looked up among this tenant's only).
  for (const SnapshotRecord& r : ListSnapshots())
    if (r.snapshot_id == id_or_name || (!r.name.empty() && r.name == id_or_name))
      return inner_.DeleteSnapshot(r.snapshot_id);
  return Error(Code::kS007, "snapshot " + id_or_name + " not found");
}

Result<nlohmann::json> TenantScope::Fs(const std::string& sandbox_id, const proto::FsCall& call) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Fs(sandbox_id, call);
}

Result<nlohmann::json> TenantScope::FsWrite(const std::string& sandbox_id, const std::string& path,
                                            uint32_t mode, bool parents, const ByteSource& source,
                                            const proto::FileMetadata& metadata) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.FsWrite(sandbox_id, path, mode, parents, source, metadata);
}

Status TenantScope::FsRead(const std::string& sandbox_id, const std::string& path,
                           const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.FsRead(sandbox_id, path, on_meta, sink);
}

Result<nlohmann::json> TenantScope::Process(const std::string& sandbox_id, const proto::ProcessCall& call) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.Process(sandbox_id, call);
}

Status TenantScope::FsWatch(const std::string& sandbox_id, const proto::FsWatchRequest& req,
                            FsWatchSink& sink) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.FsWatch(sandbox_id, req, sink);
}

Result<proto::ProcInfo> TenantScope::ProcessOutput(const std::string& sandbox_id,
                                                   const proto::ProcOutputRequest& req,
                                                   ProcessOutputSink& sink) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.ProcessOutput(sandbox_id, req, sink);
}

Result<proto::ProcInputResult> TenantScope::ProcessInput(const std::string& sandbox_id,
                                                         const proto::ProcInputRequest& req,
                                                         const ByteSource& source) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.ProcessInput(sandbox_id, req, source);
}

Result<proto::PortConnectResult> TenantScope::PortRelay(const std::string& sandbox_id, uint16_t port,
                                                        const ByteSource& upstream, PortSink& sink) {
  SKIFF_RETURN_IF_ERROR(Own(sandbox_id));
  return inner_.PortRelay(sandbox_id, port, upstream, sink);
}

}  // namespace skiff
