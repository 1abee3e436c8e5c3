// An atomic whole-file write: the bytes go to a temporary sibling of the
// target (created O_EXCL|O_NOFOLLOW), which is fsync'ed and renamed over
// the target on Commit; until then the target is untouched, and an
// uncommitted write removes its temporary file. Used by fs.write and fs.sed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/unique_fd.h"
#include "protocol/file_metadata.h"

namespace skiff::agent {

// 16 random hex digits, for temporary sibling names.
std::string RandomSuffix();

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
  // Set as the new file's user.e2b.* attributes at Commit (file_xattrs.h).
  void SetMetadata(proto::FileMetadata m) { metadata_ = std::move(m); }
  // fchown (kept owner), fchmod, metadata, fsync, rename over the target.
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
  proto::FileMetadata metadata_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  uint64_t written_ = 0;
  bool done_ = false;
};

}  // namespace skiff::agent
