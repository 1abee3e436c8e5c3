#include "agent/fs_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "agent/fs_request.h"

namespace skiff::agent {

std::vector<std::string> ListNames(int dirfd) {
  std::vector<std::string> names;
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return names;
  }
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Depth-first, byte-wise walk of a directory fd. Never follows symlinks:
// every step is an *at() call relative to the parent's fd with O_NOFOLLOW,
// so a link swapped in during the walk is never traversed. Calls
// on_file(rel, dirfd, name) for regular files; returning false stops.
using FileFn = std::function<bool(const std::string& rel, int dirfd, const std::string& name)>;
bool WalkFiles(int dirfd, const std::string& prefix, int depth, const FileFn& on_file) {
  for (const auto& name : ListNames(dirfd)) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    std::string rel = prefix;
    if (!rel.empty()) rel += '/';
    rel += name;
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxDepth) continue;
      UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) continue;  // unreadable or swapped for a link: skipped
      if (!WalkFiles(sub.get(), rel, depth + 1, on_file)) return false;
    } else if (S_ISREG(st.st_mode)) {
      if (!on_file(rel, dirfd, name)) return false;
    }
  }
  return true;
}

// Opens a regular file for reading relative to dirfd without following a
// link and without blocking on a FIFO swapped in; -1 when not a regular file.
int OpenRegularAt(int dirfd, const char* name, bool follow) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EISDIR;
    return -1;
  }
  return fd;
}

Result<WalkRoot> OpenWalkRoot(const std::string& path, bool recursive) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return FsError(errno, path);
  bool dir = S_ISDIR(st.st_mode);
  if (S_ISLNK(st.st_mode)) {
    struct stat t {};
    dir = ::stat(path.c_str(), &t) == 0 && S_ISDIR(t.st_mode);
  }
  WalkRoot r;
  if (!dir) return r;
  if (!recursive)
    return Error(Code::kS210,
                 "recursive is false but " + path + " is a directory; pass a file, or set recursive to true");
  r.is_dir = true;
  r.dir.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!r.dir) return FsError(errno, path);
  return r;
}

int RemoveChildren(int dirfd, int depth) {
  if (depth > kMaxDepth * 4) return ELOOP;
  for (const auto& name : ListNames(dirfd)) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno == ENOENT) continue;
      return errno;
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return errno;
      if (int e = RemoveChildren(sub.get(), depth + 1)) return e;
      if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) < 0 && errno != ENOENT) return errno;
    } else {
      if (::unlinkat(dirfd, name.c_str(), 0) < 0 && errno != ENOENT) return errno;
    }
  }
  return 0;
}

// Removes `name` in dirfd, recursively for directories (links not followed).
int RemoveTreeAt(int dirfd, const char* name) {
  struct stat st {};
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dirfd, name, 0) < 0 ? errno : 0;
  UniqueFd sub(::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) return errno;
  if (int e = RemoveChildren(sub.get(), 0)) return e;
  return ::unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? errno : 0;
}

// The copy keeps the source's owner where the sandbox may set it; where it
// may not, the copy belongs to the agent, as cp without -p would leave it.
static void KeepOwner(int chown_result) { static_cast<void>(chown_result != 0); }

// Copies what is left to read of `s` to `d`; 0 or an errno. The buffer is
// on the heap: CopyTreeAt recurses once per directory level (up to
// kMaxDepth * 4), and 64 KiB of its frame per level overflowed the stack,
// killing the agent, at about 120 levels (an fs.mv of a deep tree across
// filesystems); a worker thread's stack may be smaller still (2 MiB when
// RLIMIT_STACK is unlimited).
static int CopyBytes(int s, int d) {
  constexpr size_t kBuf = 65536;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  for (;;) {
    ssize_t n = ::read(s, buf.get(), kBuf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(d, buf.get() + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return errno;
      off += w;
    }
  }
}

int CopyTreeAt(int sdir, const char* sname, int ddir, const char* dname, int depth) {
  if (depth > kMaxDepth * 4) return ELOOP;
  struct stat st {};
  if (::fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno;
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4095) + 1, '\0');
    ssize_t n = ::readlinkat(sdir, sname, target.data(), target.size());
    if (n < 0) return errno;
    target.resize(static_cast<size_t>(n));
    if (::symlinkat(target.c_str(), ddir, dname) < 0) return errno;
    KeepOwner(::fchownat(ddir, dname, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW));
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (::mkdirat(ddir, dname, 0700) < 0) return errno;
    UniqueFd s(::openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd d(::openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!s || !d) return errno;
    for (const auto& name : ListNames(s.get()))
      if (int e = CopyTreeAt(s.get(), name.c_str(), d.get(), name.c_str(), depth + 1)) return e;
    KeepOwner(::fchown(d.get(), st.st_uid, st.st_gid));
    if (::fchmod(d.get(), st.st_mode & 07777) < 0) return errno;
    return 0;
  }
  if (S_ISREG(st.st_mode)) {
    UniqueFd s(::openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!s) return errno;
    UniqueFd d(::openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!d) return errno;
    if (int e = CopyBytes(s.get(), d.get())) return e;
    KeepOwner(::fchown(d.get(), st.st_uid, st.st_gid));
    if (::fchmod(d.get(), st.st_mode & 07777) < 0) return errno;
    return 0;
  }
  // FIFOs, sockets, device nodes.
  if (::mknodat(ddir, dname, st.st_mode, st.st_rdev) < 0) return errno;
  KeepOwner(::fchownat(ddir, dname, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW));
  return 0;
}

// chmod/chown of an O_PATH fd (race-safe: the fd names exactly the inode that
// was checked not to be a link).
int ChangeFd(int fd, uint32_t mode, int64_t uid, int64_t gid) {
  if (uid >= 0 || gid >= 0) {
    if (::fchownat(fd, "", uid >= 0 ? static_cast<uid_t>(uid) : static_cast<uid_t>(-1),
                   gid >= 0 ? static_cast<gid_t>(gid) : static_cast<gid_t>(-1), AT_EMPTY_PATH) < 0)
      return errno;
  }
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
  if (::syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0) return 0;
  if (errno != ENOSYS && errno != EINVAL) return errno;
  char p[64];
  std::snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  return ::chmod(p, mode) < 0 ? errno : 0;
}

int ChmodChildren(int dirfd, uint32_t mode, int64_t uid, int64_t gid, int depth, int64_t& count) {
  if (depth >= kMaxDepth) return 0;
  for (const auto& name : ListNames(dirfd)) {
    UniqueFd fd(::openat(dirfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;  // vanished or unreadable: skipped
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0 || S_ISLNK(st.st_mode)) continue;  // links are skipped
    if (int e = ChangeFd(fd.get(), mode, uid, gid)) return e;
    ++count;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!sub) continue;
      if (int e = ChmodChildren(sub.get(), mode, uid, gid, depth + 1, count)) return e;
    }
  }
  return 0;
}

}  // namespace skiff::agent
