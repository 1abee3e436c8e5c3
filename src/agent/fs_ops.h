// The synchronous filesystem operations of the agent (spec §3). Each takes
// the OPEN request and returns the RESULT JSON or a typed Error. fs.write and
// fs.read are streaming and live in the agent loop; their open/commit steps
// are here so they can be tested without the loop.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::agent {

// "<prefix><what>" for errno `err` (spec §3.0); S216 appends the errno name.
Error FsError(int err, std::string_view what);

Result<nlohmann::json> FsLs(const nlohmann::json& req);
Result<nlohmann::json> FsStat(const nlohmann::json& req);
Result<nlohmann::json> FsMkdir(const nlohmann::json& req);
Result<nlohmann::json> FsRm(const nlohmann::json& req);
Result<nlohmann::json> FsMv(const nlohmann::json& req);
Result<nlohmann::json> FsChmod(const nlohmann::json& req);
Result<nlohmann::json> FsGrep(const nlohmann::json& req);
Result<nlohmann::json> FsSed(const nlohmann::json& req);

// An atomic whole-file write in progress: a temporary sibling of the target.
class AtomicWrite {
 public:
  AtomicWrite() = default;
  AtomicWrite(AtomicWrite&&) noexcept;
  AtomicWrite& operator=(AtomicWrite&&) = delete;
  ~AtomicWrite();  // removes the temporary file unless committed

  // Checks the parent (creating it with `parents`), the target's type, and
  // creates the temporary file.
  static Result<AtomicWrite> Begin(const std::string& path, uint32_t mode, bool parents);
  // Begin for an existing file being rewritten (sed): keeps its mode/owner.
  static Result<AtomicWrite> BeginReplace(const std::string& path);
  Status Append(std::string_view bytes);
  // fchown (kept owner), fchmod, fsync, rename over the target.
  Status Commit();
  void Abort();
  uint64_t written() const { return written_; }

 private:
  std::string path_;  // as requested (messages)
  UniqueFd dir_;
  std::string leaf_, tmp_;
  UniqueFd fd_;
  uint32_t mode_ = 0644;
  bool keep_owner_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  uint64_t written_ = 0;
  bool done_ = false;
};

// Opens a file for fs.read: follows links; a directory is S212
// "is a directory", anything but a regular file S212 "not a regular file".
struct ReadHandle {
  UniqueFd fd;
  nlohmann::json meta;  // {size, mode, mtime}
};
Result<ReadHandle> OpenForRead(const std::string& path);

// Request field helpers: type-checked, S001 on a wrong type.
Result<std::string> ReqPath(const nlohmann::json& req, const char* key);
Result<bool> ReqBool(const nlohmann::json& req, const char* key, bool def);
Result<int64_t> ReqInt(const nlohmann::json& req, const char* key, int64_t def);

}  // namespace skiff::agent
