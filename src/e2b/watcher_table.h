// The polled watchers of envd's Filesystem service (CreateWatcher,
// GetWatcherEvents, RemoveWatcher; docs/e2b.md#polled-watchers), as
// bookkeeping only: which watchers exist, for which sandbox, and the
// events each holds until it is polled. No threads and no clock of its
// own (callers pass the time), so every rule is testable alone; the
// watches themselves run in polled_watchers.h.
//
// Bounds: at most max_per_sandbox watchers per sandbox and max_total in
// all; each holds at most max_events events and max_bytes of them. An
// event beyond either is never dropped silently: the watcher stops taking
// events and its next poll answers an error (S400) and removes it. A
// watcher nobody polled for idle_ms is removed by Expire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace skiff::e2b {

struct WatcherLimits {
  size_t max_per_sandbox = 16;
  size_t max_total = 256;
  size_t max_events = 1000;
  size_t max_bytes = size_t{256} * 1024;  // of the events' JSON
  int64_t idle_ms = int64_t{10} * 60 * 1000;
};

class WatcherTable {
 public:
  explicit WatcherTable(WatcherLimits limits = {}) : limits_(limits) {}

  // A new watcher of `sandbox_id` (its id: 32 random hex digits), or S400
  // when a cap is reached.
  Result<std::string> Add(const std::string& sandbox_id, int64_t now_ms);
  // One event for watcher `id` (a FilesystemEvent's JSON). False when the
  // watcher no longer takes events (removed, or just overflowed): its
  // watch should end.
  bool Push(const std::string& id, nlohmann::json event);
  // The watch of `id` ended: cleanly (the directory went away) or with an
  // error. Its remaining events are still answered; the poll after them
  // answers the end (S211 for a directory that went away) and removes it.
  void End(const std::string& id, const Status& why);
  // Whether the watch of `id` is still wanted (the watcher exists and has
  // not overflowed).
  bool Wanted(const std::string& id) const;

  // GetWatcherEvents: the events held, oldest first, now removed from the
  // watcher; S211 "watcher not found" for an id unknown to this sandbox;
  // the overflow or end error (the watcher is then removed).
  Result<std::vector<nlohmann::json>> Take(const std::string& sandbox_id, const std::string& id,
                                           int64_t now_ms);
  // RemoveWatcher: false for an id unknown to this sandbox.
  bool Remove(const std::string& sandbox_id, const std::string& id);
  // Every watcher of a sandbox (it stopped); their ids.
  std::vector<std::string> RemoveSandbox(const std::string& sandbox_id);
  // Watchers not polled for idle_ms, removed; their ids.
  std::vector<std::string> Expire(int64_t now_ms);
  // Every watcher (shutdown); their ids.
  std::vector<std::string> RemoveAll();

  size_t size() const;

 private:
  struct Watcher {
    std::string sandbox_id;
    int64_t last_poll_ms = 0;
    std::vector<nlohmann::json> events;
    size_t bytes = 0;
    bool overflowed = false;
    bool ended = false;
    Status end = OkStatus();
  };

  static Error NotFound(const std::string& id);

  WatcherLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Watcher> watchers_;
};

}  // namespace skiff::e2b
