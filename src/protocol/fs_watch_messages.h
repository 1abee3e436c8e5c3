// fs.watch: the changes below a directory inside the sandbox, as they
// happen (inotify in the agent). The stream:
//
//   host OPEN FsWatchRequest, END kStdin
//   agent META {} once the watch is set (EmptyResult)
//   agent DATA on kStdout: FsWatchEvent objects, one JSON text per line,
//         under the host's credit (a host that does not read holds the
//         events in the kernel's queue, not in the agent)
//   host CANCEL ends the watch: RESULT {}
//   the watched directory removed or moved away: END kStdout, RESULT {}
//
// Errors: S211 the path does not exist, S212 it is not a directory, S216
// more directories than kMaxWatchedDirs below it (or the kernel's own
// limit), S218 events were lost (more happened than the kernel could queue
// while the host did not read): the stream ends there, never silently
// short of events.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"
#include "protocol/ops.h"

namespace skiff::proto {

// Directories one recursive watch may hold.
inline constexpr size_t kMaxWatchedDirs = 65536;
// Longest event name (a path relative to the watched directory).
inline constexpr size_t kMaxWatchName = 4096;
// Longest line of fs.watch DATA a host accepts (a name of kMaxWatchName
// bytes, each escaped as \u00XX, fits).
inline constexpr size_t kMaxWatchLine = 8 * kMaxWatchName;

struct FsWatchRequest {
  static constexpr std::string_view kOp = op::kFsWatch;
  std::string path;
  bool recursive = false;  // subdirectories too, and those created later

  nlohmann::json ToJson() const;
  static Result<FsWatchRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsWatchRequest&) const = default;
};

// What happened to an entry: created (or moved in), written, removed,
// renamed (moved away or out), or its attributes changed.
enum class FsWatchChange { kCreate, kWrite, kRemove, kRename, kChmod };

std::string_view FsWatchChangeName(FsWatchChange c);  // "create", ...

struct FsWatchEvent {
  // The entry's path relative to the watched directory ("a.txt",
  // "sub/a.txt"): 1..kMaxWatchName bytes, no NUL, not absolute, no "."
  // or ".." component.
  std::string name;
  FsWatchChange change = FsWatchChange::kCreate;

  nlohmann::json ToJson() const;  // {"name", "type": "create" | ...}
  // S300 (a malformed answer of the agent) for anything else.
  static Result<FsWatchEvent> FromJson(const nlohmann::json& j);
  bool operator==(const FsWatchEvent&) const = default;
};

}  // namespace skiff::proto
