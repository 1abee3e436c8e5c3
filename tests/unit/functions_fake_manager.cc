// Definitions of SandboxManager (and the Catalog constructor it needs) for
// the handler unit tests. Linked instead of src/sandbox/manager.cc.
#include "functions_fake_manager.h"

namespace skiff {

using testing::Fake;

namespace {
Status FakeLookup(const std::string& id) {
  ++Fake().calls;
  if (!Fake().live.count(id)) return Error(Code::kS002, "sandbox not found: " + id);
  return OkStatus();
}
}  // namespace

// The double's catalog is never consulted: an empty policy will do.
Catalog::Catalog(images::ImagePolicy policy) : policy_(std::move(policy)) {}

SandboxManager::SandboxManager(Config config, std::map<std::string, std::unique_ptr<Isolator>> isolators)
    : config_(std::move(config)), isolators_(std::move(isolators)), catalog_(images::ImagePolicy{}) {}
SandboxManager::~SandboxManager() = default;

Result<CreateResult> SandboxManager::Create(const CreateSpec& spec) {
  ++Fake().calls;
  Fake().last_create = spec;
  return CreateResult{testing::kLiveId, spec.image, spec.isolation.value_or("jail")};
}

Result<ExecResult> SandboxManager::Exec(const ExecSpec& spec, OutputSink*) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(spec.sandbox_id));
  Fake().last_exec = spec;
  return Fake().exec_result;
}

Status SandboxManager::Stop(const std::string& id, bool wait) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().last_stop = id;
  Fake().last_stop_wait = wait;
  return OkStatus();
}

std::vector<ListEntry> SandboxManager::List() { return Fake().list; }

Result<ExecResult> SandboxManager::Run(const RunSpec& spec, OutputSink*) {
  ++Fake().calls;
  Fake().last_run = spec;
  ExecResult r = Fake().exec_result;
  r.sandbox_id = testing::kLiveId;
  return r;
}

std::vector<CatalogEntry> SandboxManager::CatalogList() { return Fake().catalog; }

Result<nlohmann::json> SandboxManager::Fs(const std::string& id, const nlohmann::json& op) {
  SKIFF_RETURN_IF_ERROR(FakeLookup(id));
  Fake().fs_calls.emplace_back(id, op);
  return Fake().fs_result;
}

Result<nlohmann::json> SandboxManager::FsWrite(const std::string& id, const std::string& path, uint32_t mode,
                                               bool parents, const ByteSource& source) {
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

Status SandboxManager::FsRead(const std::string& id, const std::string&,
                              const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) {
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

namespace testing {
FakeState& Fake() {
  static FakeState state;
  return state;
}
}  // namespace testing

}  // namespace skiff
