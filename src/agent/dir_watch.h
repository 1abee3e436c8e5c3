// DirWatch: one fs.watch inside the sandbox (protocol/fs_watch_messages.h)
// over inotify. It owns the inotify fd and the map from watch descriptors
// to directories relative to the watched one; a recursive watch follows
// directories created or moved in below it, and lets go of those removed
// or moved out. It reads only when asked (the agent asks when the host has
// credit), so events the host has not taken wait in the kernel's queue.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::agent {

class DirWatch {
 public:
  // Watches `path` (a directory; symlinks to one are followed) and, with
  // `recursive`, every directory below it (not through symlinks). S211 /
  // S212 / S215 as the fs ops report them; S216 above
  // proto::kMaxWatchedDirs directories or the kernel's watch limit.
  static Result<std::unique_ptr<DirWatch>> Begin(const std::string& path, bool recursive);

  // The inotify fd to poll for POLLIN.
  int fd() const { return fd_.get(); }

  // Reads what the kernel queued (one read) and appends each change as an
  // FsWatchEvent JSON line to `lines`. Returns false once the watched
  // directory itself is gone (removed or moved away): the watch is over.
  // S218 when the kernel's queue overflowed (events were lost).
  Result<bool> Read(std::string& lines);

  size_t watched_dirs() const { return dirs_.size(); }

 private:
  DirWatch(UniqueFd fd, bool recursive) : fd_(std::move(fd)), recursive_(recursive) {}
  // Watches `rel` (relative to the root; "" is the root) and, when
  // recursive, the directories below it.
  Status AddTree(const std::string& rel);
  Status AddOne(const std::string& rel, bool follow);
  // Stops watching `rel` and everything below it.
  void RemoveTree(const std::string& rel);

  UniqueFd fd_;
  bool recursive_;
  std::string root_;
  int root_wd_ = -1;
  std::unordered_map<int, std::string> dirs_;  // wd -> path relative to root_
};

}  // namespace skiff::agent
