// The snapshot templates on disk and the lock protocol that guards them.
//
// Layout under the store's root:
//   <key>/state, <key>/meta.json   a finished template (its migration stream)
//   <key>.lock                     the key's lock file (flock), never removed
//                                  while the template exists
//   <key>.tmp<pid>                 a build in progress, renamed to <key>
//
// The rules, all enforced here:
//   - a restore holds the key's lock shared for as long as it reads the
//     template (TemplateLease);
//   - a build holds it exclusive, checks again that no other process built
//     the template meanwhile, writes into <key>.tmp<pid> and renames it into
//     place, so a reader sees a whole template or none; one build per key
//     at a time, across processes;
//   - removing a template (a failed restore, pruning) takes the lock
//     exclusive without waiting and skips a template that is busy.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::microvm {

// One key's flock, released when destroyed.
class TemplateLock {
 public:
  // Opens (creating) <root>/<key>.lock; takes no lock yet.
  static Result<TemplateLock> Open(const std::string& root, const std::string& key);

  void LockExclusive();  // waits
  void LockShared();     // waits; converts an exclusive lock
  bool TryLockExclusive();
  void Unlock();

 private:
  explicit TemplateLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// A finished template held for reading (shared lock).
class TemplateLease {
 public:
  const std::string& dir() const { return dir_; }
  // Gives the template up as broken: drops the lease and removes the
  // template when no other process holds it (it is rebuilt next time).
  void Discard();

 private:
  friend class TemplateStore;
  TemplateLease(TemplateLock lock, std::string dir) : lock_(std::move(lock)), dir_(std::move(dir)) {}
  TemplateLock lock_;
  std::string dir_;
};

class TemplateStore {
 public:
  explicit TemplateStore(std::string root, size_t max_templates = 8)
      : root_(std::move(root)), max_templates_(max_templates) {}

  const std::string& root() const { return root_; }
  std::string Dir(const std::string& key) const { return root_ + "/" + key; }

  // Writes a template into an empty directory: at least its "state" file.
  using BuildFn = std::function<Status(const std::string& dir)>;

  // The template of `key`, built first with `build` when there is none
  // (*built says whether this call built it; a build is followed by a
  // Prune). An error of `build` is returned as it is, leaving nothing.
  Result<TemplateLease> Acquire(const std::string& key, const BuildFn& build, bool* built = nullptr);

  // The keys of the finished templates.
  std::vector<std::string> List() const;

  // Keeps the newest max_templates templates (by last use, the state file's
  // atime) and removes the leftovers of interrupted builds, except `keep`
  // and whatever is busy.
  void Prune(const std::string& keep) const;

  // Marks a template used now (for Prune; the cache may be mounted
  // noatime). `fd` is its open state file.
  static void Touch(int fd);

 private:
  std::string root_;
  size_t max_templates_;
};

}  // namespace skiff::microvm
