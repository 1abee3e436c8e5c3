// A snapshot's record (docs/snapshots.md): what the API lists and what the
// store keeps next to the saved state.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "sandbox/types.h"

namespace skiff {

// The sandbox a hibernation snapshot holds (pause.cc): what a later daemon
// needs to list it again under its own id and wake it (manager's
// AdoptHibernated).
struct HibernatedSandbox {
  std::string sandbox_id;
  std::optional<std::string> name;
  Env env;  // create-time env
  uint64_t idle_timeout_secs = 300;
  bool pause_on_idle = false;
  bool hibernate_on_idle = false;
  bool auto_resume = false;
  int64_t created_unix_ms = 0;
  bool network = false;  // created with network: true (its wake makes it a new one)
};

struct SnapshotRecord {
  std::string snapshot_id;  // a UUID
  std::string name;         // "" or unique among the store's snapshots
  std::string source_sandbox_id;
  std::string image;
  std::string isolation;  // "jail" | "microvm"
  uint32_t cpus = 1;
  uint32_t memory_mb = 512;
  bool memory = false;  // processes and memory too ("memory+disk"), else files only ("disk")
  // Taken of a sandbox with network: true. A memory+disk one restores only
  // into a sandbox with network: true (its VM has a NIC), and one without
  // only into one without.
  bool network = false;
  uint64_t size_bytes = 0;
  int64_t created_unix_ms = 0;
  std::string tenant;
  bool internal = false;
  // Set on a hibernated sandbox's own snapshot (internal, and kept across
  // daemon restarts, unlike a fork's).
  std::optional<HibernatedSandbox> sandbox;

  // The public view (no tenant, no internal flag).
  nlohmann::json ToJson() const;
  nlohmann::json ToRecordJson() const;  // on disk
  static Result<SnapshotRecord> FromRecordJson(const nlohmann::json& j);
};

// The form of a snapshot's id or name wherever one is given
// (docs/snapshots.md): 1 to kMaxSnapshotRef letters, digits, '-', '_' and
// '.'.
inline constexpr size_t kMaxSnapshotRef = 64;
inline bool IsSnapshotRefChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}
inline bool IsSnapshotRef(std::string_view ref) {
  if (ref.empty() || ref.size() > kMaxSnapshotRef) return false;
  for (char c : ref)
    if (!IsSnapshotRefChar(c)) return false;
  return true;
}

}  // namespace skiff
