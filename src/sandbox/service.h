// SandboxService: the sandbox API as the functions layer and the transports
// use it. SandboxManager (manager.h) implements it over real sandboxes;
// tests implement it with doubles. Everything it returns on failure is an
// Error with an S-code.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "images/catalog.h"
#include "protocol/fs_call.h"
#include "protocol/messages.h"
#include "protocol/process_call.h"
#include "sandbox/snapshot_record.h"
#include "sandbox/types.h"

namespace skiff {

class SandboxService {
 public:
  virtual ~SandboxService() = default;

  virtual Result<CreateResult> Create(const CreateSpec& spec) = 0;
  virtual Result<ExecResult> Exec(const ExecSpec& spec, OutputSink* sink = nullptr) = 0;
  virtual Status Stop(const std::string& sandbox_id, bool wait) = 0;
  // Stops every process of a running sandbox where it stands (memory,
  // files and host resources kept) / lets a paused one run on. S006 when
  // it already is in that state.
  virtual Status Pause(const std::string& sandbox_id) = 0;
  virtual Status Resume(const std::string& sandbox_id) = 0;
  // Pauses to disk (docs/snapshots.md, "Hibernation"): the state is saved
  // and the VMM exits; Resume starts it again. S006 when already
  // hibernated, S300 on a backend that cannot.
  virtual Status Hibernate(const std::string& sandbox_id) = 0;
  virtual std::vector<ListEntry> List() = 0;
  // Snapshots (docs/snapshots.md): saves a running or paused sandbox (it
  // runs on, or stays paused); `name` may be "".
  virtual Result<SnapshotRecord> Snapshot(const std::string& sandbox_id, const std::string& name) = 0;
  // `count` new sandboxes from one sandbox's current state.
  virtual Result<std::vector<CreateResult>> Fork(const std::string& sandbox_id, uint32_t count) = 0;
  // Every listed snapshot, with its tenant.
  virtual std::vector<SnapshotRecord> ListSnapshots() = 0;
  virtual Status DeleteSnapshot(const std::string& id_or_name) = 0;
  // CPU, memory and disk use of a live sandbox, running or paused: S002
  // unknown, S004 stopping, S005 hibernated (or a paused microVM whose guest
  // could not be sampled before the pause), S300 when its backend cannot
  // tell (a microVM guest's agent that does not answer, or answers
  // nonsense).
  virtual Result<SandboxMetrics> Metrics(const std::string& sandbox_id) = 0;
  // The tenant recorded at the create of `sandbox_id` (CreateSpec::tenant)
  // while it is live or being stopped; nullopt when the id names neither.
  virtual std::optional<std::string> TenantOf(const std::string& sandbox_id) = 0;
  virtual Result<ExecResult> Run(const RunSpec& spec, OutputSink* sink = nullptr) = 0;
  virtual std::vector<CatalogEntry> CatalogList() = 0;

  // A one-shot fs op, already validated. Returns the agent's RESULT (the
  // spec's response), checked against the op's answer type.
  virtual Result<nlohmann::json> Fs(const std::string& sandbox_id, const proto::FsCall& call) = 0;
  // fs::write from a stream (or a string: a source returning it once);
  // `metadata` (already checked) becomes the file's user.e2b.* attributes.
  virtual Result<nlohmann::json> FsWrite(const std::string& sandbox_id, const std::string& path,
                                         uint32_t mode, bool parents, const ByteSource& source,
                                         const proto::FileMetadata& metadata) = 0;
  // fs::read: `on_meta` is called once before any byte; `sink` gets the bytes.
  virtual Status FsRead(const std::string& sandbox_id, const std::string& path,
                        const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) = 0;
  // fs.watch (protocol/fs_watch_messages.h): the changes below a directory
  // into `sink` until it says no (S216), the directory goes away (OK) or
  // the sandbox stops (sandbox/dir_watch_client.h).
  virtual Status FsWatch(const std::string& sandbox_id, const proto::FsWatchRequest& req,
                         FsWatchSink& sink) = 0;

  // Live processes (docs/api.md#sandboxprocessstart). A one-shot op, already
  // validated; returns the agent's RESULT, checked against the op's answer
  // type. A proc.start carries the caller's env, cwd and user: the service
  // layers them as for exec (sandbox/command_env.h).
  virtual Result<nlohmann::json> Process(const std::string& sandbox_id, const proto::ProcessCall& call) = 0;
  // proc.output into `sink`; the process's record at the end.
  virtual Result<proto::ProcInfo> ProcessOutput(const std::string& sandbox_id,
                                                const proto::ProcOutputRequest& req,
                                                ProcessOutputSink& sink) = 0;
  // proc.input of the bytes `source` yields.
  virtual Result<proto::ProcInputResult> ProcessInput(const std::string& sandbox_id,
                                                      const proto::ProcInputRequest& req,
                                                      const ByteSource& source) = 0;

  // A TCP connection to `port` of the sandbox's own loopback, through its
  // agent (op port.connect): the bytes `upstream` yields are written to it
  // (an empty chunk half-closes it), what the server sends goes to `sink`
  // until it closes. S222 when nothing listens there; the counts at the end.
  virtual Result<proto::PortConnectResult> PortRelay(const std::string& sandbox_id, uint16_t port,
                                                     const ByteSource& upstream, PortSink& sink) = 0;

  // Host facts for doctor, /healthz and /metrics.
  virtual nlohmann::json Doctor() = 0;
  virtual std::string default_isolation() const = 0;
  virtual std::vector<std::string> available_isolations() const = 0;
  // The microVM accelerator in use ("kvm" or "tcg"); empty without microVM.
  virtual std::string microvm_accel() const = 0;
  virtual SandboxStats& stats() = 0;
  virtual std::vector<PoolStatus> PoolStats() = 0;
  virtual HostFacts Host() = 0;
  virtual void SetCreateObserver(CreateObserver observer) = 0;
};

}  // namespace skiff
