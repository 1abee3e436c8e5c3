// SandboxManager: the library API of skiff (create, exec, stop, list, run,
// fs). It owns every sandbox, enforces caps atomically, runs the reaper,
// and speaks to agents through the protocol. Transports (CLI, HTTP, iii WS)
// call it with typed, already-validated requests; it never parses JSON from
// callers. Everything it returns on failure is an Error with an S-code.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "images/catalog.h"
#include "isolation/isolator.h"
#include "protocol/client.h"
#include "sandbox/config.h"

namespace skiff {

using Env = std::vector<std::pair<std::string, std::string>>;

struct CreateSpec {
  std::string image;
  std::optional<uint32_t> cpus;
  std::optional<uint32_t> memory_mb;
  std::optional<std::string> name;
  bool network = false;
  std::optional<uint64_t> idle_timeout_secs;
  Env env;
  std::optional<std::string> isolation;  // "microvm" | "jail"
};

struct CreateResult {
  std::string sandbox_id;
  std::string image;
  std::string isolation;
};

// Receives output as it is produced (CLI streaming). May be null.
struct OutputSink {
  virtual ~OutputSink() = default;
  virtual void OnStdout(std::string_view bytes) = 0;
  virtual void OnStderr(std::string_view bytes) = 0;
};

struct ExecSpec {
  std::string sandbox_id;
  std::vector<std::string> argv;  // resolved command shape, argv[0] = program
  Env env;
  std::string stdin_bytes;
  std::optional<uint64_t> timeout_ms;
  std::optional<std::string> workdir;
};

struct ExecResult {
  std::string stdout_text;  // UTF-8 sanitized, <= 1 MiB of bytes kept
  std::string stderr_text;
  int exit_code = 0;
  uint64_t duration_ms = 0;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::optional<std::string> sandbox_id;  // run with keep_sandbox
  nlohmann::json ToJson() const;          // spec §2.2.5 response
};

struct RunFile {
  std::string path;
  std::string content;
};

struct RunSpec {
  CreateSpec create;
  std::string code;
  std::string lang;
  std::vector<RunFile> files;
  std::string stdin_bytes;
  std::optional<uint64_t> timeout_ms;
  bool keep_sandbox = false;
  std::optional<std::string> workdir;
};

struct ListEntry {
  std::string sandbox_id;
  std::optional<std::string> name;
  std::string image;
  int64_t age_secs = 0;
  uint32_t exec_in_flight = 0;
  uint32_t exec_slots_free = 0;
  bool stopped = false;
  std::string isolation;
  std::string created_at;
  std::string last_activity_at;
  uint32_t cpus = 0;
  uint32_t memory_mb = 0;
  bool network = false;
  nlohmann::json ToJson() const;
};

// Pulls a streamed upload body chunk by chunk. Returns "" at end of stream,
// or an error (S218) when the source stalls or aborts.
using ByteSource = std::function<Result<std::string>()>;
// Receives a streamed download; return false to abort.
using ByteSink = std::function<bool(std::string_view)>;

struct FsReadMeta {
  uint64_t size = 0;
  std::string mode;  // "0644"
  int64_t mtime = 0;
};

class Sandbox;  // sandbox/manager.cc

class SandboxManager {
 public:
  // `isolators` maps "jail"/"microvm" to the backends this host offers.
  SandboxManager(Config config, std::map<std::string, std::unique_ptr<Isolator>> isolators);
  ~SandboxManager();  // stops every sandbox (wait) and the reaper

  // Builds the isolators this host supports and a manager for them.
  static Result<std::unique_ptr<SandboxManager>> FromConfig(Config config);

  Result<CreateResult> Create(const CreateSpec& spec);
  Result<ExecResult> Exec(const ExecSpec& spec, OutputSink* sink = nullptr);
  Status Stop(const std::string& sandbox_id, bool wait);
  std::vector<ListEntry> List();
  Result<ExecResult> Run(const RunSpec& spec, OutputSink* sink = nullptr);
  std::vector<CatalogEntry> CatalogList();

  // A non-streaming fs op: `op` is the agent request ({"op":"fs.ls",...}),
  // already validated. Returns the agent's RESULT (the spec's response).
  Result<nlohmann::json> Fs(const std::string& sandbox_id, const nlohmann::json& op);
  // fs::write from a stream (or a string: a source returning it once).
  Result<nlohmann::json> FsWrite(const std::string& sandbox_id, const std::string& path, uint32_t mode,
                                 bool parents, const ByteSource& source);
  // fs::read: `on_meta` is called once before any byte; `sink` gets the bytes.
  Status FsRead(const std::string& sandbox_id, const std::string& path,
                const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink);

  // One reaper pass (the reaper thread calls it every 10 s).
  void ReapOnce();
  // Stops everything and refuses new work.
  void Shutdown();

  const Config& config() const { return config_; }
  std::string default_isolation() const { return default_isolation_; }
  std::vector<std::string> available_isolations() const;
  nlohmann::json Doctor();
  // The microVM accelerator in use ("kvm" or "tcg"); empty without microVM.
  std::string microvm_accel() const;
  // Counters for /metrics.
  struct Stats {
    std::atomic<uint64_t> created{0}, reaped{0}, execs{0};
  };
  Stats& stats() { return stats_; }

  // The warm pool of one image (spec §7.3), for /metrics and tests.
  struct PoolStatus {
    std::string image;
    uint32_t target = 0;
    uint32_t ready = 0;          // booted, unclaimed
    uint64_t hits = 0;           // creates served from the pool
    uint64_t misses = 0;         // creates of this image that booted fresh
    uint64_t fill_failures = 0;  // failed background boots
  };
  std::vector<PoolStatus> PoolStats();
  // Called after every successful create (sandbox::create and run) with the
  // image, whether a pooled sandbox was claimed, and the time it took. The
  // observer runs on the creating thread and must be cheap; null clears it.
  using CreateObserver = std::function<void(const std::string& image, bool pooled, double seconds)>;
  void SetCreateObserver(CreateObserver observer);

 private:
  struct Pool {
    uint32_t target = 0;
    std::deque<std::shared_ptr<Sandbox>> ready;
    uint64_t hits = 0, misses = 0, fill_failures = 0;
    uint32_t consecutive_failures = 0;
    std::chrono::steady_clock::time_point retry_at{};
  };
  struct BootParams {
    std::string image;
    std::string isolation;
    uint32_t cpus = 1;
    uint32_t memory_mb = 512;
    bool network = false;
  };

  Result<std::shared_ptr<Sandbox>> Lookup(const std::string& id);
  // Whether a stop of `sb` has begun; takes mu_.
  bool Stopping(const Sandbox& sb);
  // Resolves the image and starts an agent under `p`; the sandbox is in no
  // registry yet. Failures leave nothing behind.
  Result<std::shared_ptr<Sandbox>> Boot(const BootParams& p);
  // Arms removal on agent death (registry or pool). Call once the sandbox is
  // registered; fires at once when the agent has already died.
  void WatchAgent(const std::shared_ptr<Sandbox>& sb);
  void OnAgentDeath(const std::shared_ptr<Sandbox>& sb, const std::string& why);
  void ReaperLoop();
  void PoolLoop();
  void NotifyCreated(const std::string& image, bool pooled, std::chrono::steady_clock::time_point t0);
  void TeardownInBackground(std::shared_ptr<Sandbox> sb);

  Config config_;
  std::map<std::string, std::unique_ptr<Isolator>> isolators_;
  std::string default_isolation_;
  Catalog catalog_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::map<std::string, std::shared_ptr<Sandbox>> tearing_down_;  // stop/reap in progress
  uint32_t reserved_ = 0;                                         // creates in progress
  bool shutting_down_ = false;
  std::condition_variable reaper_cv_;
  uint32_t pending_teardowns_ = 0;
  std::condition_variable teardown_cv_;
  std::thread reaper_;
  Stats stats_;
  // Warm pools by image, guarded by mu_; pool_cv_ wakes the filler.
  std::map<std::string, Pool> pools_;
  std::condition_variable pool_cv_;
  std::thread pool_filler_;
  std::mutex pool_join_mu_;
  std::mutex observer_mu_;
  CreateObserver observer_;
};

}  // namespace skiff
