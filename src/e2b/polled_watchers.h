// The Python SDK's polled watchers (docs/e2b.md#polled-watchers): each
// watcher is one fs.watch of its sandbox (SandboxService::FsWatch) run on
// a thread of its own, whose events wait in a WatcherTable until
// GetWatcherEvents takes them. A watcher ends when it is removed, polled
// after an overflow or the end of its watch, left unpolled too long
// (Expire), or with its sandbox; its thread then leaves the watch within
// about a second (FsWatchSink::Wanted) and is joined by the next Create or
// Expire, or by the destructor.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "e2b/watcher_table.h"
#include "protocol/fs_watch_messages.h"
#include "sandbox/service.h"

namespace skiff::e2b {

class PolledWatchers {
 public:
  explicit PolledWatchers(SandboxService& svc, WatcherLimits limits = {}) : svc_(svc), table_(limits) {}
  ~PolledWatchers();  // ends every watch and joins its thread
  PolledWatchers(const PolledWatchers&) = delete;
  PolledWatchers& operator=(const PolledWatchers&) = delete;

  // CreateWatcher: answers once the agent watches the directory (its id),
  // or with the watch's error (S211 for a missing directory, S212 for a
  // file, S400 at a cap).
  Result<std::string> Create(const std::string& sandbox_id, const proto::FsWatchRequest& req,
                             bool include_entry, int64_t now_ms);
  // GetWatcherEvents (WatcherTable::Take).
  Result<std::vector<nlohmann::json>> Events(const std::string& sandbox_id, const std::string& id,
                                             int64_t now_ms);
  // RemoveWatcher: S211 for an id unknown to the sandbox.
  Status Remove(const std::string& sandbox_id, const std::string& id);
  // Every watcher of a sandbox that stopped.
  void RemoveSandbox(const std::string& sandbox_id);
  // Removes watchers idle too long and joins the threads that finished.
  void Expire(int64_t now_ms);

  size_t size() const { return table_.size(); }

 private:
  struct Runner {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Reap();

  SandboxService& svc_;
  WatcherTable table_;
  std::mutex mu_;
  std::map<std::string, Runner> runners_;
};

}  // namespace skiff::e2b
