// Host uid ranges for sandboxes: one 65536-wide range per slot, never
// overlapping /etc/subuid or /etc/subgid, each locked with flock so that
// other skiff processes on the host never pick the same one, and marked in
// its lock file while a sandbox uses it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::jail {

inline constexpr uint32_t kRangeSize = 65536;

// [first, end) host ids.
using IdRange = std::pair<uint64_t, uint64_t>;

// Parses the text of an /etc/subuid-style file ("name:first:count" per
// line; blank lines and '#' comments allowed). A malformed line is an error
// (S300) naming `file` and the line number.
Result<std::vector<IdRange>> ParseSubidFile(std::string_view text, std::string_view file);

// The ranges of /etc/subuid and /etc/subgid (a missing file has none).
Result<std::vector<IdRange>> ReadSubidRanges();

// Live host processes whose real uid lies in [lo, hi), with that uid.
std::vector<std::pair<pid_t, uint64_t>> ProcessesInUidRange(uint64_t lo, uint64_t hi);

// SIGKILLs `pid` if it still runs with a uid in [lo, hi), checked again
// once a pidfd pins it.
bool KillIfUidInRange(pid_t pid, uint64_t lo, uint64_t hi);

class UidSlots {
 public:
  struct Slot {
    uint32_t slot = 0;
    uint32_t base = 0;
    UniqueFd lock;
  };

  UidSlots(uint32_t uid_base, uint32_t slots, std::vector<IdRange> reserved, std::string lock_dir)
      : uid_base_(uid_base), slots_(slots), reserved_(std::move(reserved)), lock_dir_(std::move(lock_dir)) {}

  // A free range, locked and marked in use. A mark left by a holder that
  // died with its sandbox running is honoured: that range's processes are
  // killed first (or the range skipped).
  Result<Slot> Acquire();
  // Once the slot's processes are gone: clears the mark and unlocks.
  void Release(Slot& s);
  // Whether this process holds `slot`.
  bool HeldHere(uint32_t slot);
  std::string LockPath(uint32_t slot) const;
  uint64_t FirstUid(uint32_t slot) const { return uid_base_ + uint64_t{slot} * kRangeSize; }

 private:
  bool Allowed(uint32_t slot) const;

  uint32_t uid_base_;
  uint32_t slots_;
  std::vector<IdRange> reserved_;
  std::string lock_dir_;
  std::mutex mu_;
  std::set<uint32_t> used_;  // slots held by this process
  uint32_t hint_ = 0;
};

}  // namespace skiff::jail
