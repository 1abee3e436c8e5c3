// A test double of the SandboxService for the handler unit tests: the
// handlers' calls (ops, specs, sources) are recorded in FakeState and
// answered from it, without sandboxes.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "functions/registry.h"
#include "sandbox/service.h"

namespace skiff::testing {

struct FakeState {
  std::set<std::string> live;  // ids the fake knows; others give S002
  int calls = 0;               // manager calls that reached lookup
  std::vector<std::pair<std::string, nlohmann::json>> fs_calls;
  nlohmann::json fs_result = nlohmann::json::object();
  CreateSpec last_create;
  ExecSpec last_exec;
  RunSpec last_run;
  std::string last_stop;
  bool last_stop_wait = false;
  // FsWrite
  std::string write_path, write_data;
  uint32_t write_mode = 0;
  bool write_parents = false;
  proto::FileMetadata write_metadata;
  std::optional<Error> write_source_error;
  // FsRead
  std::string file;
  std::string file_mode = "0644";
  int reads = 0;
  ExecResult exec_result;
  std::vector<ListEntry> list;
  std::set<std::string> paused;            // Pause/Resume: ids paused now
  std::set<std::string> hibernated;        // Hibernate: ids hibernated (and paused) now
  std::vector<SnapshotRecord> snapshots;   // Snapshot adds, DeleteSnapshot removes
  std::set<std::string> snapshots_in_use;  // ids DeleteSnapshot refuses with S008
  uint32_t last_fork_count = 0;
  SandboxMetrics metrics;                      // what Metrics answers for a live id
  std::optional<Error> fork_error;             // what Fork answers instead of copies
  std::map<std::string, std::string> tenants;  // TenantOf: id -> tenant (ids in `live` only)
  std::vector<CatalogEntry> catalog;
  std::vector<ImageService> create_services;  // what Create says the image declares
  // Process*: the requests as the agent would receive them, and answers.
  std::vector<std::pair<std::string, nlohmann::json>> proc_calls;
  nlohmann::json proc_result = nlohmann::json::object();
  std::string proc_output_stdout;  // ProcessOutput sends it from offset 0 on stdout
  std::string proc_input;          // ProcessInput collects here
  proto::ProcInfo proc_info;
  // FsWatch: the request, the events it reports after its start, and how it
  // ends (OK: the directory went away); a failure before the start instead
  // when watch_refusal is set.
  std::optional<proto::FsWatchRequest> watch_request;
  std::vector<proto::FsWatchEvent> watch_events;
  Status watch_end = OkStatus();
  std::optional<Error> watch_refusal;
  // PortRelay: the bytes written to the "server" land in port_request; it
  // answers port_response in pieces of port_piece bytes (S222 with
  // port_refused).
  std::vector<std::pair<std::string, uint16_t>> port_calls;
  std::string port_request;
  std::string port_response;
  size_t port_piece = 7;
  bool port_refused = false;

  void Reset() { *this = FakeState(); }
};

FakeState& Fake();
inline constexpr const char* kLiveId = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";
inline constexpr const char* kUnknownId = "00000000-0000-4000-8000-000000000000";

// The SandboxService the handlers call: records every call in Fake() and
// answers from it. Ids not in Fake().live give S002.
class FakeSandboxService : public SandboxService {
 public:
  Result<CreateResult> Create(const CreateSpec& spec) override;
  Result<ExecResult> Exec(const ExecSpec& spec, OutputSink* sink = nullptr) override;
  Status Stop(const std::string& sandbox_id, bool wait) override;
  Status Pause(const std::string& sandbox_id) override;
  Status Resume(const std::string& sandbox_id) override;
  Status Hibernate(const std::string& sandbox_id) override;
  Result<SnapshotRecord> Snapshot(const std::string& sandbox_id, const std::string& name) override;
  Result<std::vector<CreateResult>> Fork(const std::string& sandbox_id, uint32_t count) override;
  std::vector<SnapshotRecord> ListSnapshots() override { return Fake().snapshots; }
  Status DeleteSnapshot(const std::string& id_or_name) override;
  Result<SandboxMetrics> Metrics(const std::string& sandbox_id) override;
  std::vector<ListEntry> List() override;
  std::optional<std::string> TenantOf(const std::string& sandbox_id) override;
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
  nlohmann::json Doctor() override { return nlohmann::json::object(); }
  std::string default_isolation() const override { return "jail"; }
  std::vector<std::string> available_isolations() const override { return {}; }
  std::string microvm_accel() const override { return {}; }
  SandboxStats& stats() override { return stats_; }
  std::vector<PoolStatus> PoolStats() override { return {}; }
  HostFacts Host() override { return host; }
  void SetCreateObserver(CreateObserver) override {}

  HostFacts host;  // what Host() answers

 private:
  SandboxStats stats_;
};

// A ChannelBroker double that runs producers immediately into a buffer.
class FakeBroker : public ChannelBroker {
 public:
  Result<nlohmann::json> CreateReadChannel(Producer producer) override {
    producers.push_back(std::move(producer));
    return nlohmann::json{
        {"channel_id", "c" + std::to_string(producers.size())}, {"access_key", "k"}, {"direction", "read"}};
  }
  Result<ByteSource> AttachReader(const nlohmann::json& ref) override {
    attached.push_back(ref);
    auto chunks = std::make_shared<std::vector<std::string>>(stream_chunks);
    auto i = std::make_shared<size_t>(0);
    return ByteSource([chunks, i]() -> Result<std::string> {
      if (*i >= chunks->size()) return std::string();
      return (*chunks)[(*i)++];
    });
  }
  Result<nlohmann::json> CreateChannelPair(uint32_t buffer_size) override {
    sizes.push_back(buffer_size);
    return nlohmann::json{{"writer", {{"channel_id", "x"}, {"access_key", "k"}, {"direction", "write"}}},
                          {"reader", {{"channel_id", "x"}, {"access_key", "k"}, {"direction", "read"}}}};
  }
  // Runs producer `i` and returns what a reader would receive.
  std::string Drain(size_t i, Status* status = nullptr) {
    std::string out;
    Status st = producers.at(i)([&](std::string_view b) {
      out.append(b);
      chunk_sizes.push_back(b.size());
      return true;
    });
    if (status) *status = st;
    return out;
  }

  std::vector<Producer> producers;
  std::vector<nlohmann::json> attached;
  std::vector<std::string> stream_chunks;
  std::vector<uint32_t> sizes;
  std::vector<size_t> chunk_sizes;
};

}  // namespace skiff::testing
