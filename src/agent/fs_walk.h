// Fd-relative walking of directory trees for the filesystem operations.
// Below the root every step is an *at() call relative to the parent
// directory's fd with O_NOFOLLOW (or AT_SYMLINK_NOFOLLOW): a symbolic link,
// even one swapped in during the walk, is never traversed, so no walk can
// leave the tree it started in. Each level of depth holds one fd; trees are
// not walked below kMaxDepth.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::agent {

// Deeper trees are not walked further (each level holds one fd).
inline constexpr int kMaxDepth = 256;

// Names in a directory (without . and ..), sorted byte-wise.
std::vector<std::string> ListNames(int dirfd);

// Depth-first, byte-wise walk of a directory fd. Never follows symlinks:
// every step is an *at() call relative to the parent's fd with O_NOFOLLOW,
// so a link swapped in during the walk is never traversed. Calls
// on_file(rel, dirfd, name) for regular files; returning false stops.
using FileFn = std::function<bool(const std::string& rel, int dirfd, const std::string& name)>;
bool WalkFiles(int dirfd, const std::string& prefix, int depth, const FileFn& on_file);

// Opens a regular file for reading relative to dirfd without following a
// link and without blocking on a FIFO swapped in; -1 when not a regular file.
int OpenRegularAt(int dirfd, const char* name, bool follow);

// The root of a grep/sed walk.
struct WalkRoot {
  bool is_dir = false;
  UniqueFd dir;  // is_dir
};

// Opens `path` (followed when it is a link) as the root of a walk: a
// directory needs `recursive` (S210 otherwise); a file gives is_dir false.
Result<WalkRoot> OpenWalkRoot(const std::string& path, bool recursive);

// Removes everything below dirfd (never following links), then nothing else.
// Returns 0 or an errno.
int RemoveChildren(int dirfd, int depth);

// Removes `name` in dirfd, recursively for directories (links not followed).
int RemoveTreeAt(int dirfd, const char* name);

// Copies `sname` in sdir to `dname` in ddir (files, dirs, links, specials),
// keeping modes and owners; never follows links. For mv across filesystems.
int CopyTreeAt(int sdir, const char* sname, int ddir, const char* dname, int depth);

// chmod/chown of an O_PATH fd (race-safe: the fd names exactly the inode that
// was checked not to be a link). uid/gid < 0 are left unchanged.
int ChangeFd(int fd, uint32_t mode, int64_t uid, int64_t gid);

// ChangeFd on everything below dirfd; links are skipped, not followed.
// `count` is incremented per inode changed.
int ChmodChildren(int dirfd, uint32_t mode, int64_t uid, int64_t gid, int depth, int64_t& count);

}  // namespace skiff::agent
