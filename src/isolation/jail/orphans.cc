#include "isolation/jail/orphans.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <set>

#include "base/file_io.h"
#include "base/log.h"
#include "base/scoped_dir.h"
#include "isolation/jail/cgroup.h"
#include "isolation/jail/fs_paths.h"

namespace skiff::jail {
namespace {

// Whether another process holds the flock on `path`.
bool HeldElsewhere(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) < 0;
  ::close(fd);
  return held;
}

}  // namespace

std::string LiveLockPath(const std::string& lock_dir, const std::string& id) {
  return lock_dir + "/live-" + id + ".lock";
}

Status RecordStateDir(int fd, const std::string& state_dir) {
  if (::ftruncate(fd, 0) != 0) return Error::Sys(Code::kS300, "ftruncate", "liveness lock", errno);
  if (::lseek(fd, 0, SEEK_SET) != 0) return Error::Sys(Code::kS300, "lseek", "liveness lock", errno);
  return WriteAll(fd, state_dir, "liveness lock");
}

std::string RecordedStateDir(const std::string& lock_path, const std::string& id) {
  Result<std::string> text = ReadFile(lock_path, 4096);
  if (!text.ok()) return {};
  const std::string suffix = "/sandboxes/" + id;
  const std::string& dir = *text;
  if (!SafeName(id, 128) || !CleanAbsolute(dir) || dir.size() <= suffix.size() ||
      dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  return dir;
}

void CleanupOrphans(const OrphanScope& scope) {
  // 1. Processes running as a sandbox uid whose slot nobody holds.
  const uint64_t lo = scope.uid_base, hi = lo + uint64_t{scope.slots} * kRangeSize;
  std::set<uint32_t> free_checked, busy;
  for (auto [pid, uid] : ProcessesInUidRange(lo, hi)) {
    uint32_t slot = static_cast<uint32_t>((uid - lo) / kRangeSize);
    if (scope.uid_slots->HeldHere(slot)) continue;
    if (busy.count(slot)) continue;
    if (!free_checked.count(slot)) {
      if (HeldElsewhere(scope.uid_slots->LockPath(slot))) {
        busy.insert(slot);
        continue;
      }
      free_checked.insert(slot);
    }
    uint64_t slot_lo = lo + uint64_t{slot} * kRangeSize;
    if (KillIfUidInRange(pid, slot_lo, slot_lo + kRangeSize))
      SKIFF_LOG(Info) << "jail: killed orphan sandbox process " << pid << " (uid " << uid << ")";
  }
  // 2. Sandboxes whose liveness lock nobody holds: cgroups, state dirs, lock.
  std::set<std::string> orphan_ids;
  if (auto d = ScopedDir::Open(scope.lock_dir); d.ok()) {
    while (const dirent* e = d->Next()) {
      std::string name = e->d_name;
      if (name.rfind("live-", 0) != 0 || name.size() < 11) continue;
      std::string id = name.substr(5, name.size() - 10);
      if (!HeldElsewhere(scope.lock_dir + "/" + name)) orphan_ids.insert(id);
    }
  }
  // A sandbox paused when its daemon died is frozen: its processes act on
  // the kills above only once thawed, and a cgroup holding them cannot go.
  for (const auto& base : scope.cgroup_bases) {
    if (auto d = ScopedDir::Open(base); d.ok()) {
      while (const dirent* e = d->Next()) {
        std::string id = e->d_name;
        if (e->d_type != DT_DIR || !SafeName(id, 128)) continue;
        if (HeldElsewhere(LiveLockPath(scope.lock_dir, id))) continue;
        std::string dir = base;
        dir.append("/").append(id);
        ThawCgroupDir(dir);
      }
    }
  }
  for (const auto& base : scope.cgroup_bases) {
    if (auto d = ScopedDir::Open(base); d.ok()) {
      while (const dirent* e = d->Next()) {
        std::string id = e->d_name;
        if (e->d_type != DT_DIR || !SafeName(id, 128)) continue;
        if (HeldElsewhere(LiveLockPath(scope.lock_dir, id))) continue;
        std::string dir = base;
        dir.append("/").append(id);
        if (!KillAndRemoveCgroup(dir)) {
          SKIFF_LOG(Warn) << "jail: could not remove orphan cgroup " << base << "/" << id;
        }
      }
    }
  }
  for (const auto& id : orphan_ids) {
    if (!SafeName(id, 128)) continue;
    SKIFF_LOG(Info) << "jail: removing leftovers of sandbox " << id;
    // Started by a skiff with a runtime directory of its own, its state
    // lies there; a lock written before locks recorded it, here.
    if (std::string recorded = RecordedStateDir(LiveLockPath(scope.lock_dir, id), id); !recorded.empty())
      RemoveTree(recorded);
    RemoveTree(scope.sandboxes_dir + "/" + id);
    ::unlink(LiveLockPath(scope.lock_dir, id).c_str());
  }
}

}  // namespace skiff::jail
