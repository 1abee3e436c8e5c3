// The snapshots on disk (docs/snapshots.md): one directory per snapshot
// under the store's root (0700), holding what the backend saved and
// record.json (0600), written last, so a directory without it is a save
// that did not finish (removed by Load). Records persist across daemon
// restarts. Caps: a count and a total size (S400 when a new snapshot would
// exceed either). A jail sandbox created from a snapshot reads its files
// for its whole life, so a snapshot in use cannot be deleted (S008);
// fork's own snapshots are internal: never listed, removed when their last
// user goes, and at the next start. A hibernated sandbox's own snapshot is
// internal too but kept across restarts (its record names the sandbox),
// and from Close on (daemon shutdown) it is not removed when its sandbox
// goes: the next daemon adopts the hibernated sandboxes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/snapshot_record.h"

namespace skiff {

class SnapshotStore {
 public:
  SnapshotStore(std::string root, uint64_t max_bytes, uint32_t max_count)
      : root_(std::move(root)), max_bytes_(max_bytes), max_count_(max_count) {}

  // Reads the records; removes unfinished saves and internal snapshots
  // other than hibernations.
  void Load();
  // The hibernated sandboxes' snapshots, oldest first.
  std::vector<SnapshotRecord> Hibernations() const;
  // A hibernation whose sandbox cannot be taken up again becomes an
  // ordinary listed snapshot named `name`, so nothing of it is lost.
  Result<SnapshotRecord> Publish(const std::string& id, const std::string& name);
  // Shutdown: from now on Unuse keeps hibernations (a fork's still goes).
  void Close();

  // A directory for a snapshot being saved, counted against the caps
  // until Commit or Abort. S400 at the count cap, S001 for a name in use.
  struct Pending {
    std::string id;
    std::string dir;
    uint64_t room = 0;  // the bytes it may take
  };
  Result<Pending> Begin(const std::string& name, bool internal);
  // Records it (the record's id and size are filled in). S400 when the
  // total size cap is exceeded (the snapshot is removed).
  Result<SnapshotRecord> Commit(const Pending& p, SnapshotRecord record);
  void Abort(const Pending& p);

  // By id or name; S007 when there is none (internal ones included only by id).
  Result<SnapshotRecord> Get(const std::string& id_or_name) const;
  std::string Dir(const std::string& id) const { return root_ + "/" + id; }
  std::vector<SnapshotRecord> List() const;  // not internal, oldest first
  // S007 unknown, S008 while a sandbox uses it.
  Status Delete(const std::string& id_or_name);

  // A sandbox depends on the snapshot's files from its start to its end.
  void Use(const std::string& id, const std::string& sandbox_id);
  void Unuse(const std::string& id, const std::string& sandbox_id);

  uint64_t used_bytes() const;
  const std::string& root() const { return root_; }

 private:
  void RemoveLocked(const std::string& id);
  const std::string root_;
  const uint64_t max_bytes_;
  const uint32_t max_count_;
  mutable std::mutex mu_;
  std::map<std::string, SnapshotRecord> records_;
  std::map<std::string, std::string> pending_;          // id -> name
  std::map<std::string, std::set<std::string>> users_;  // id -> sandbox ids
  bool closed_ = false;
};

}  // namespace skiff
