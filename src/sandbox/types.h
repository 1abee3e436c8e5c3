// The typed requests and results of the sandbox API (create, exec, stop,
// list, run, fs), shared by the service interface (service.h), its
// implementation (manager.h) and every caller. Plain values: transports
// decode JSON into them; nothing here talks to a sandbox.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "images/image_service.h"
#include "isolation/isolator.h"
#include "protocol/fs_watch_messages.h"

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
  // What the reaper does once it is idle: stop it, or pause it (processes
  // stopped, memory kept) until a call resumes it.
  bool pause_on_idle = false;
  // With pause_on_idle: hibernate (state saved to disk, VMM freed) instead.
  bool hibernate_on_idle = false;
  // A call that needs it running resumes a paused sandbox instead of S005.
  bool auto_resume = false;
  // Start from this snapshot (id or name; docs/snapshots.md): its image,
  // isolation, cpus and memory are the snapshot's (the request's must
  // agree when given).
  std::optional<std::string> snapshot;
  // The id the caller chose (canonical UUID), or nullopt for a new random
  // one. A create naming a live sandbox of the same tenant and image
  // answers that sandbox, so a retried create is safe.
  std::optional<std::string> sandbox_id;
  // The tenant creating it (docs/configuration.md#tenants): the name of the
  // caller's API key with tenancy on, "" otherwise. Set by TenantScope,
  // never from a request.
  std::string tenant;
};

struct CreateResult {
  std::string sandbox_id;
  std::string image;
  std::string isolation;
  // The services the image declares (docs/images.md#services); the caller
  // decides whether to start them (the E2B create does).
  std::vector<ImageService> services;
};

// Receives an exec's or a run's output as it is produced (the CLI's
// terminal, the daemon's run stream). May be null. Returning false (the
// reader went away) cancels the command; the call then fails.
struct OutputSink {
  virtual ~OutputSink() = default;
  // A run's sandbox exists (SandboxService::Run, before its files are written).
  virtual bool OnSandbox(const std::string& sandbox_id) {
    (void)sandbox_id;
    return true;
  }
  virtual bool OnStdout(std::string_view bytes) = 0;
  virtual bool OnStderr(std::string_view bytes) = 0;
  // Asked about once a second while the command is quiet.
  virtual bool Wanted() { return true; }
};

// Receives a live process's output as proc.output streams it
// (SandboxService::ProcessOutput). Offsets are absolute byte offsets of the
// process's stdout (channel 1) or stderr (channel 2). Returning false ends
// the stream (the reader went away); the process keeps running.
struct ProcessOutputSink {
  virtual ~ProcessOutputSink() = default;
  // Once, first: where each channel's bytes start (above the asked offset
  // when the process's buffer no longer held those bytes).
  virtual bool OnStart(int64_t stdout_from, int64_t stderr_from) = 0;
  virtual bool OnData(uint8_t channel, int64_t offset, std::string_view bytes) = 0;
  // The bytes [from, to) of `channel` were overwritten before they could be
  // sent; the channel continues at `to`.
  virtual bool OnGap(uint8_t channel, int64_t from, int64_t to) = 0;
  // Asked about once a second while a followed process is quiet: false
  // ends the stream (a client that disconnected without a byte to write).
  virtual bool Wanted() { return true; }
};

// Receives the changes fs.watch reports (SandboxService::FsWatch).
// Returning false ends the watch (the reader went away).
struct FsWatchSink {
  virtual ~FsWatchSink() = default;
  // Once, first: the watch is set; every change from now on is reported.
  virtual bool OnStart() = 0;
  virtual bool OnEvent(const proto::FsWatchEvent& event) = 0;
  // Asked about once a second while nothing changes: false ends the watch
  // (a client that disconnected without a byte to write).
  virtual bool Wanted() { return true; }
};

// The server's side of a forwarded connection (SandboxService::PortRelay).
struct PortSink {
  virtual ~PortSink() = default;
  // Once, when the connection inside the sandbox is up, before any byte;
  // false ends it.
  virtual bool OnConnected() { return true; }
  // The server's bytes, in order; false ends the connection.
  virtual bool OnData(std::string_view bytes) = 0;
  // Asked about once a second while the server is quiet: false ends the
  // connection (a client that went away).
  virtual bool Wanted() { return true; }
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
  nlohmann::json ToJson() const;          // docs/api.md#sandboxexec response
};

struct RunFile {
  std::string path;
  std::string content;
};

struct RunSpec {
  CreateSpec create;
  // Either code run by the interpreter `lang` names, or a command (argv,
  // non-empty; code and lang empty).
  std::string code;
  std::string lang;
  std::vector<std::string> argv;
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
  std::string state;        // "running" | "paused" | "stopping"
  bool hibernated = false;  // paused to disk (Hibernate)
  std::string isolation;
  std::string created_at;
  std::string last_activity_at;
  uint32_t cpus = 0;
  uint32_t memory_mb = 0;
  bool network = false;
  std::string tenant;  // CreateSpec::tenant of its create; not on the wire
};

// S002 for an id that names no sandbox the caller can reach. An unknown id
// and another tenant's sandbox get exactly this, so they cannot be told apart.
Error SandboxNotFound(const std::string& sandbox_id);
// S005 for a call that needs a paused sandbox running.
Error SandboxPaused(const std::string& sandbox_id);

// Pulls a streamed upload body chunk by chunk. Returns "" at end of stream,
// or an error (S218) when the source stalls or aborts.
using ByteSource = std::function<Result<std::string>()>;
// Receives a streamed download; return false to abort.
using ByteSink = std::function<bool(std::string_view)>;

// sandbox::metrics (docs/api.md#sandboxmetrics): one sample.
struct SandboxMetrics {
  ResourceUsage usage;
  int64_t timestamp_unix_ms = 0;  // when it was taken
};

struct FsReadMeta {
  uint64_t size = 0;
  std::string mode;  // "0644"
  int64_t mtime = 0;
};

// Counters for /metrics.
struct SandboxStats {
  std::atomic<uint64_t> created{0}, reaped{0}, execs{0}, paused{0}, resumed{0};
};

// What a fleet router places creates by (skiff::host::status,
// docs/multihost.md): this daemon's identity and room.
struct HostFacts {
  std::string boot_id;         // new at every daemon start: a restart is visible
  uint32_t max_sandboxes = 0;  // max_concurrent_sandboxes
  uint32_t sandboxes = 0;      // live (running or paused) and being created
  uint32_t pooled_ready = 0;   // booted sandboxes waiting in warm pools
};

// The warm pool of one image (docs/configuration.md#warm-pool), for /metrics and tests.
struct PoolStatus {
  std::string image;
  uint32_t target = 0;
  uint32_t ready = 0;          // booted, unclaimed
  uint64_t hits = 0;           // creates served from the pool
  uint64_t misses = 0;         // creates of this image that booted fresh
  uint64_t fill_failures = 0;  // failed background boots
};

// Called after every successful create (sandbox::create and run) with the
// image, whether a pooled sandbox was claimed, and the time it took. The
// observer runs on the creating thread and must be cheap; null clears it.
using CreateObserver = std::function<void(const std::string& image, bool pooled, double seconds)>;

}  // namespace skiff
