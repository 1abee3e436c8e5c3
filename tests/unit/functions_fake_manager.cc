// FakeSandboxService: the handlers' double of the SandboxService.
#include <algorithm>

#include "functions_fake_manager.h"

namespace skiff::testing {

namespace {
Status FakeLookup(const std::string& id) {
  ++Fake().calls;
  if (!Fake().live.count(id)) return SandboxNotFound(id);
  return OkStatus();
}
}  // namespace

Result<CreateResult> FakeSandboxService::Create(const CreateSpec& spec) {
  ++Fake().calls;
  Fake().last_create = spec;
  return CreateResult{kLiveId, spec.image, spec.isolation.value_or("jail"), Fake().create_services};
}

Result<ExecResult> FakeSandboxService::Exec(const ExecSpec& spec, OutputSink*) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(spec.sandbox_id));
  Fake().last_exec = spec;
  return Fake().exec_result;
}

Status FakeSandboxService::Stop(const std::string& id, bool wait) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().last_stop = id;
  Fake().last_stop_wait = wait;
  return OkStatus();
}

Status FakeSandboxService::Pause(const std::string& id) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  if (!Fake().paused.insert(id).second) return Error(Code::kS006, "sandbox " + id + " is already paused");
  return OkStatus();
}

Result<SandboxMetrics> FakeSandboxService::Metrics(const std::string& id) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  return Fake().metrics;
}

Result<SnapshotRecord> FakeSandboxService::Snapshot(const std::string& id, const std::string& name) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  for (const SnapshotRecord& s : Fake().snapshots)
    if (!name.empty() && s.name == name)
      return InvalidRequest("field 'name': a snapshot named '" + name + "' exists");
  SnapshotRecord r;
  r.snapshot_id = "5a5a5a5a-0000-4000-8000-00000000000" + std::to_string(Fake().snapshots.size() % 10);
  r.name = name;
  r.source_sandbox_id = id;
  r.image = "python";
  r.isolation = "jail";
  r.size_bytes = 4096;
  r.created_unix_ms = 1700000000000;
  r.tenant = TenantOf(id).value_or("");
  Fake().snapshots.push_back(r);
  return r;
}

Result<std::vector<CreateResult>> FakeSandboxService::Fork(const std::string& id, uint32_t count) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().last_fork_count = count;
  if (Fake().fork_error) return *Fake().fork_error;
  std::vector<CreateResult> out;
  // The copies are live sandboxes of the source's tenant, as the manager's are.
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back({"f0f0f0f0-0000-4000-8000-0000000000" + std::to_string(10 + i), "python", "jail"});
    Fake().live.insert(out.back().sandbox_id);
    if (auto t = Fake().tenants.find(id); t != Fake().tenants.end())
      Fake().tenants[out.back().sandbox_id] = t->second;
  }
  return out;
}

Status FakeSandboxService::DeleteSnapshot(const std::string& id_or_name) {
  for (auto it = Fake().snapshots.begin(); it != Fake().snapshots.end(); ++it)
    if (it->snapshot_id == id_or_name || (!it->name.empty() && it->name == id_or_name)) {
      if (Fake().snapshots_in_use.count(it->snapshot_id))
        return Error(Code::kS008, "snapshot " + it->snapshot_id + " is in use");
      Fake().snapshots.erase(it);
      return OkStatus();
    }
  return Error(Code::kS007, "snapshot " + id_or_name + " not found");
}

Status FakeSandboxService::Hibernate(const std::string& id) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  if (!Fake().hibernated.insert(id).second)
    return Error(Code::kS006, "sandbox " + id + " is already hibernated");
  Fake().paused.insert(id);
  return OkStatus();
}

Status FakeSandboxService::Resume(const std::string& id) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  if (Fake().paused.erase(id) == 0) return Error(Code::kS006, "sandbox " + id + " is not paused");
  Fake().hibernated.erase(id);
  return OkStatus();
}

std::vector<ListEntry> FakeSandboxService::List() {
  std::vector<ListEntry> out = Fake().list;
  for (ListEntry& e : out) e.state = Fake().paused.count(e.sandbox_id) ? "paused" : "running";
  return out;
}

std::optional<std::string> FakeSandboxService::TenantOf(const std::string& id) {
  if (!Fake().live.count(id)) return std::nullopt;
  auto it = Fake().tenants.find(id);
  return it == Fake().tenants.end() ? std::string() : it->second;
}

Result<ExecResult> FakeSandboxService::Run(const RunSpec& spec, OutputSink*) {
  ++Fake().calls;
  Fake().last_run = spec;
  ExecResult r = Fake().exec_result;
  r.sandbox_id = kLiveId;
  return r;
}

std::vector<CatalogEntry> FakeSandboxService::CatalogList() { return Fake().catalog; }

Result<nlohmann::json> FakeSandboxService::Fs(const std::string& id, const proto::FsCall& call) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  // Recorded as the agent would receive it, so the tests pin the wire.
  Fake().fs_calls.emplace_back(id, proto::ToJson(call));
  return Fake().fs_result;
}

Result<nlohmann::json> FakeSandboxService::Process(const std::string& id, const proto::ProcessCall& call) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().proc_calls.emplace_back(id, proto::ToJson(call));
  return Fake().proc_result;
}

Result<proto::ProcInfo> FakeSandboxService::ProcessOutput(const std::string& id,
                                                          const proto::ProcOutputRequest& req,
                                                          ProcessOutputSink& sink) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().proc_calls.emplace_back(id, req.ToJson());
  const std::string& out = Fake().proc_output_stdout;
  int64_t from = std::min<int64_t>(req.stdout_from, static_cast<int64_t>(out.size()));
  if (!sink.OnStart(from, 0)) return Error(Code::kS216, "reader went away");
  if (from < static_cast<int64_t>(out.size()) &&
      !sink.OnData(1, from, std::string_view(out).substr(static_cast<size_t>(from))))
    return Error(Code::kS216, "reader went away");
  return Fake().proc_info;
}

Result<proto::ProcInputResult> FakeSandboxService::ProcessInput(const std::string& id,
                                                                const proto::ProcInputRequest& req,
                                                                const ByteSource& source) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().proc_calls.emplace_back(id, req.ToJson());
  int64_t n = 0;
  for (;;) {
    Result<std::string> chunk = source();
    if (!chunk.ok()) return std::move(chunk).error();
    if (chunk->empty()) break;
    Fake().proc_input += *chunk;
    n += static_cast<int64_t>(chunk->size());
  }
  return proto::ProcInputResult{n};
}

Result<nlohmann::json> FakeSandboxService::FsWrite(const std::string& id, const std::string& path,
                                                   uint32_t mode, bool parents, const ByteSource& source,
                                                   const proto::FileMetadata& metadata) {
  Fake().write_metadata = metadata;
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().write_path = path;
  Fake().write_mode = mode;
  Fake().write_parents = parents;
  std::string data;
  for (;;) {
    Result<std::string> chunk = source();
    if (!chunk.ok()) return std::move(chunk).error();
    if (chunk->empty()) break;
    data += *chunk;
  }
  Fake().write_data = data;
  return nlohmann::json{{"bytes_written", data.size()}};
}

Status FakeSandboxService::FsRead(const std::string& id, const std::string&,
                                  const std::function<void(const FsReadMeta&)>& on_meta,
                                  const ByteSink& sink) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  ++Fake().reads;
  on_meta(FsReadMeta{Fake().file.size(), Fake().file_mode, 1788264000});
  for (size_t off = 0; off < Fake().file.size(); off += 65536) {
    if (!sink(std::string_view(Fake().file).substr(off, 65536))) {
      return Error(Code::kS216, "fs i/o error: aborted by reader");
    }
  }
  return OkStatus();
}

Status FakeSandboxService::FsWatch(const std::string& id, const proto::FsWatchRequest& req,
                                   FsWatchSink& sink) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().watch_request = req;
  if (Fake().watch_refusal) return *Fake().watch_refusal;
  if (!sink.OnStart()) return Error(Code::kS216, "fs.watch: the reader went away");
  for (const proto::FsWatchEvent& e : Fake().watch_events)
    if (!sink.OnEvent(e)) return Error(Code::kS216, "fs.watch: the reader went away");
  return Fake().watch_end;
}

FakeState& Fake() {
  static FakeState state;
  return state;
}

Result<proto::PortConnectResult> FakeSandboxService::PortRelay(const std::string& id, uint16_t port,
                                                               const ByteSource& upstream, PortSink& sink) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().port_calls.emplace_back(id, port);
  if (Fake().port_refused)
    return Error(Code::kS222, "nothing listens on port " + std::to_string(port) + " in the sandbox");
  if (!sink.OnConnected()) return Error(Code::kS216, "the reader went away");
  proto::PortConnectResult r;
  for (;;) {
    Result<std::string> chunk = upstream();
    if (!chunk.ok()) return std::move(chunk).error();
    if (chunk->empty()) break;
    Fake().port_request += *chunk;
    r.bytes_in += static_cast<int64_t>(chunk->size());
  }
  const std::string& out = Fake().port_response;
  for (size_t at = 0; at < out.size(); at += Fake().port_piece) {
    std::string_view piece = std::string_view(out).substr(at, Fake().port_piece);
    if (!sink.OnData(piece)) return Error(Code::kS216, "the reader went away");
    r.bytes_out += static_cast<int64_t>(piece.size());
  }
  return r;
}

}  // namespace skiff::testing
