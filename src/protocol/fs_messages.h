// The filesystem requests (fs.*) and their answers (see the table in
// messages.h). Requests' FromJson give the agent's S001/S210 errors; the
// answers' FromJson give S300 (a malformed answer of the agent). Modes are
// integers in requests and four octal digits ("0644") in answers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "protocol/file_metadata.h"
#include "protocol/ops.h"

namespace skiff::proto {

// ------------------------------------------------------------ shared answers

// One directory entry (fs.ls, fs.stat), of lstat: a link is reported, not
// followed. Owner and group are names as the sandbox's /etc/passwd and
// /etc/group give them, or the number in decimal when they name none.
struct FsEntry {
  // Longest owner or group name an answer may carry.
  static constexpr size_t kMaxNameBytes = 256;

  std::string name;
  bool is_dir = false;
  int64_t size = 0;   // >= 0
  std::string mode;   // "0644"
  int64_t mtime = 0;  // seconds since the epoch
  bool is_symlink = false;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string owner;  // 1..kMaxNameBytes bytes
  std::string group;  // 1..kMaxNameBytes bytes
  // Symlinks only, and only when the link could be read: the absolute
  // target, the link text joined with the link's directory and normalised
  // lexically ("." and ".." removed; further links not followed).
  std::optional<std::string> symlink_target;
  // Files and directories: the user.e2b.* attributes (protocol/file_metadata.h);
  // absent on the wire when empty.
  FileMetadata metadata;

  nlohmann::json ToJson() const;
  static Result<FsEntry> FromJson(const nlohmann::json& j);
  bool operator==(const FsEntry&) const = default;
};

// ------------------------------------------------------------ fs.ls / fs.stat

struct FsLsRequest {
  static constexpr std::string_view kOp = op::kFsLs;
  std::string path;

  nlohmann::json ToJson() const;
  static Result<FsLsRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsLsRequest&) const = default;
};

struct FsLsResult {
  std::vector<FsEntry> entries;  // sorted by name

  nlohmann::json ToJson() const;
  static Result<FsLsResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsLsResult&) const = default;
};

// fs.stat answers one FsEntry.
struct FsStatRequest {
  static constexpr std::string_view kOp = op::kFsStat;
  std::string path;

  nlohmann::json ToJson() const;
  static Result<FsStatRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsStatRequest&) const = default;
};

// ------------------------------------------------------------ fs.mkdir

struct FsMkdirRequest {
  static constexpr std::string_view kOp = op::kFsMkdir;
  std::string path;
  uint32_t mode = 0755;  // absent or null on the wire: 0755
  bool parents = false;

  nlohmann::json ToJson() const;
  static Result<FsMkdirRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsMkdirRequest&) const = default;
};

struct FsMkdirResult {
  bool created = false;  // false: it existed (parents)

  nlohmann::json ToJson() const;
  static Result<FsMkdirResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsMkdirResult&) const = default;
};

// ------------------------------------------------------------ fs.write

// The body follows as DATA on kStdin, then END (CANCEL aborts: S218).
struct FsWriteRequest {
  static constexpr std::string_view kOp = op::kFsWrite;
  std::string path;
  uint32_t mode = 0644;  // absent or null on the wire: 0644
  bool parents = false;
  // Set as the new file's user.e2b.* attributes before it replaces the
  // target (so the target's old ones are gone); absent on the wire when
  // empty. A filesystem without user attributes fails the write (S216, ENOTSUP).
  FileMetadata metadata;

  nlohmann::json ToJson() const;
  static Result<FsWriteRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsWriteRequest&) const = default;
};

struct FsWriteResult {
  int64_t bytes_written = 0;  // >= 0
  // The request's metadata was set (on the wire only when true). An agent
  // from before metadata ignores the field and never says so: the host
  // then fails the write (S219) rather than drop the metadata silently.
  bool metadata_set = false;

  nlohmann::json ToJson() const;
  static Result<FsWriteResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsWriteResult&) const = default;
};

// ------------------------------------------------------------ fs.read

// Answered by META FsReadMeta, DATA on kStdout, END kStdout, RESULT {}.
struct FsReadRequest {
  static constexpr std::string_view kOp = op::kFsRead;
  std::string path;

  nlohmann::json ToJson() const;
  static Result<FsReadRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsReadRequest&) const = default;
};

struct FsReadMeta {
  int64_t size = 0;  // >= 0
  std::string mode;  // "0644"
  int64_t mtime = 0;

  nlohmann::json ToJson() const;
  static Result<FsReadMeta> FromJson(const nlohmann::json& j);
  bool operator==(const FsReadMeta&) const = default;
};

// ------------------------------------------------------------ fs.rm / fs.mv

struct FsRmRequest {
  static constexpr std::string_view kOp = op::kFsRm;
  std::string path;
  bool recursive = false;

  nlohmann::json ToJson() const;
  static Result<FsRmRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsRmRequest&) const = default;
};

// RESULT {"removed":true}.
struct FsRmResult {
  bool removed = true;

  nlohmann::json ToJson() const;
  static Result<FsRmResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsRmResult&) const = default;
};

struct FsMvRequest {
  static constexpr std::string_view kOp = op::kFsMv;
  std::string src;
  std::string dst;
  bool overwrite = false;

  nlohmann::json ToJson() const;
  static Result<FsMvRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsMvRequest&) const = default;
};

// RESULT {"moved":true}.
struct FsMvResult {
  bool moved = true;

  nlohmann::json ToJson() const;
  static Result<FsMvResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsMvResult&) const = default;
};

// ------------------------------------------------------------ fs.chmod

struct FsChmodRequest {
  static constexpr std::string_view kOp = op::kFsChmod;
  std::string path;
  uint32_t mode = 0;            // required
  std::optional<uint32_t> uid;  // 0..0xFFFFFFFE; absent: unchanged
  std::optional<uint32_t> gid;
  bool recursive = false;

  nlohmann::json ToJson() const;
  static Result<FsChmodRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsChmodRequest&) const = default;
};

struct FsChmodResult {
  int64_t updated = 0;  // inodes changed, >= 0

  nlohmann::json ToJson() const;
  static Result<FsChmodResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsChmodResult&) const = default;
};

// ------------------------------------------------------------ fs.grep

struct FsGrepRequest {
  static constexpr std::string_view kOp = op::kFsGrep;
  std::string path;
  std::string pattern;  // RE2
  bool recursive = true;
  bool ignore_case = false;
  std::vector<std::string> include_glob;
  std::vector<std::string> exclude_glob;
  int64_t max_matches = 10000;    // >= 0; 0: no limit
  int64_t max_line_bytes = 4096;  // >= 0; 0: no cut

  nlohmann::json ToJson() const;
  static Result<FsGrepRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsGrepRequest&) const = default;
};

struct FsGrepMatch {
  std::string path;
  int64_t line = 0;  // 1-based
  std::string content;
  int64_t byte_offset = 0;  // of the match in the file

  nlohmann::json ToJson() const;
  static Result<FsGrepMatch> FromJson(const nlohmann::json& j);
  bool operator==(const FsGrepMatch&) const = default;
};

struct FsGrepResult {
  std::vector<FsGrepMatch> matches;
  bool truncated = false;

  nlohmann::json ToJson() const;
  static Result<FsGrepResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsGrepResult&) const = default;
};

// ------------------------------------------------------------ fs.sed

// Either `files` (edited as listed) or `path` (a file, or a tree with
// `recursive` and the globs). On the wire the path form carries path,
// recursive, include_glob and exclude_glob and no files; the files form
// carries files only. FromJson reads every field (defaults when absent);
// giving both or neither is S210, an empty pattern S210. A files entry that
// is empty or has a NUL is kept: the agent reports it per file.
struct FsSedRequest {
  static constexpr std::string_view kOp = op::kFsSed;
  std::vector<std::string> files;
  std::optional<std::string> path;
  std::string pattern;
  std::string replacement;
  bool regex = true;
  bool first_only = false;
  bool ignore_case = false;
  bool recursive = true;
  std::vector<std::string> include_glob;
  std::vector<std::string> exclude_glob;

  nlohmann::json ToJson() const;
  static Result<FsSedRequest> FromJson(const nlohmann::json& j);
  bool operator==(const FsSedRequest&) const = default;
};

struct FsSedFileResult {
  std::string path;
  int64_t replacements = 0;  // >= 0
  bool success = false;
  std::optional<std::string> error;  // !success

  nlohmann::json ToJson() const;
  static Result<FsSedFileResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsSedFileResult&) const = default;
};

struct FsSedResult {
  std::vector<FsSedFileResult> results;
  int64_t total_replacements = 0;  // >= 0

  nlohmann::json ToJson() const;
  static Result<FsSedResult> FromJson(const nlohmann::json& j);
  bool operator==(const FsSedResult&) const = default;
};

}  // namespace skiff::proto
