#include "isolation/jail/layer_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/scoped_dir.h"
#include "base/unique_fd.h"

namespace skiff::jail {
namespace {

constexpr uint32_t kRange = 65536;

struct Walk {
  IdShift shift;
  uint64_t max_bytes;
  uint64_t bytes = 0;
  uint64_t entries = 0;
  // The read/write fallback's buffer, allocated on first use (not
  // thread-local: TLS is zeroed in every thread of every skiff process).
  std::vector<char> buf;
};

uint32_t Shift(uint32_t id, const IdShift& s) {
  if (id >= s.from && id - s.from < kRange) return id - s.from + s.to;
  return s.to + 65534;
}

// The xattrs worth keeping: the overlay's own (opaque directories,
// redirects) in either namespace, and the sandbox's user.* ones.
bool KeepXattr(std::string_view name) {
  return name.starts_with("trusted.overlay.") || name.starts_with("user.");
}

// Copies the kept xattrs of `src` to `dst` (both O_PATH-free fds, or a
// path under /proc/self/fd for symlinks, which have none worth keeping).
Status CopyXattrs(int src, int dst) {
  char names[8192];
  ssize_t n = ::flistxattr(src, names, sizeof names);
  if (n < 0) {
    if (errno == ENOTSUP || errno == EOPNOTSUPP) return OkStatus();
    if (errno == ERANGE) return Error(Code::kS400, "resource limit exceeded: too many extended attributes");
    return Error::Sys(Code::kS300, "flistxattr", "snapshot", errno);
  }
  char value[65536];
  for (ssize_t off = 0; off < n;) {
    std::string_view name(names + off);
    off += static_cast<ssize_t>(name.size()) + 1;
    if (!KeepXattr(name)) continue;
    std::string key(name);
    ssize_t v = ::fgetxattr(src, key.c_str(), value, sizeof value);
    if (v < 0) continue;  // gone meanwhile, or too large for any xattr we keep
    if (::fsetxattr(dst, key.c_str(), value, static_cast<size_t>(v), 0) != 0)
      return Error::Sys(Code::kS300, "fsetxattr", key, errno);
  }
  return OkStatus();
}

Status Meta(int fd, const struct stat& st, const IdShift& shift) {
  if (::fchown(fd, Shift(st.st_uid, shift), Shift(st.st_gid, shift)) != 0)
    return Error::Sys(Code::kS300, "fchown", "snapshot", errno);
  if (::fchmod(fd, st.st_mode & 07777) != 0) return Error::Sys(Code::kS300, "fchmod", "snapshot", errno);
  timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(fd, times) != 0) return Error::Sys(Code::kS300, "futimens", "snapshot", errno);
  return OkStatus();
}

Status CopyFile(int src_dir, const char* name, int dst_dir, const struct stat& st, Walk& w) {
  UniqueFd in(::openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!in) return Error::Sys(Code::kS300, "open", name, errno);
  struct stat now {};
  if (::fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode) || now.st_ino != st.st_ino)
    return OkStatus();  // replaced meanwhile (the sandbox is frozen; not expected)
  if (static_cast<uint64_t>(now.st_size) > w.max_bytes - w.bytes)
    return Error(Code::kS400,
                 "resource limit exceeded: the sandbox's files are larger than the snapshot size cap (" +
                     std::to_string(w.max_bytes >> 20) + " MiB)");
  UniqueFd out(::openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::Sys(Code::kS300, "create", name, errno);
  uint64_t left = static_cast<uint64_t>(now.st_size);
  bool plain = false;  // copy_file_range between filesystems fails (EXDEV) on many kernels
  while (left > 0) {
    ssize_t n;
    if (!plain) {
      n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, left, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
        plain = true;
        continue;
      }
    } else {
      if (w.buf.empty()) w.buf.resize(size_t{1} << 16);
      n = ::read(in.get(), w.buf.data(), static_cast<size_t>(std::min<uint64_t>(left, w.buf.size())));
      for (ssize_t off = 0; n > 0 && off < n;) {
        ssize_t wrote = ::write(out.get(), w.buf.data() + off, static_cast<size_t>(n - off));
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote < 0) return Error::Sys(Code::kS300, "write", name, errno);
        off += wrote;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, plain ? "read" : "copy_file_range", name, errno);
    if (n == 0) break;  // shrank meanwhile
    left -= static_cast<uint64_t>(n);
  }
  w.bytes += static_cast<uint64_t>(now.st_size) - left;
  SKIFF_RETURN_IF_ERROR(CopyXattrs(in.get(), out.get()));
  return Meta(out.get(), now, w.shift);
}

Status CopyDir(int src, int dst, int depth, Walk& w) {
  if (depth > kMaxDepth)
    return Error(Code::kS400, "resource limit exceeded: directories nested too deep to snapshot");
  UniqueFd listing(::openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!listing) return Error::Sys(Code::kS300, "open", "directory", errno);
  SKIFF_ASSIGN_OR_RETURN(ScopedDir dir, ScopedDir::Adopt(std::move(listing), "snapshot directory"));
  while (const dirent* e = dir.Next()) {
    if (++w.entries > kMaxEntries)
      return Error(Code::kS400, "resource limit exceeded: more than " + std::to_string(kMaxEntries) +
                                    " files to snapshot");
    const char* name = e->d_name;
    struct stat st {};
    if (::fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(dst, name, 0700) != 0) return Error::Sys(Code::kS300, "mkdir", name, errno);
      UniqueFd s(::openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      UniqueFd d(::openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!s || !d) return Error::Sys(Code::kS300, "open", name, errno);
      SKIFF_RETURN_IF_ERROR(CopyDir(s.get(), d.get(), depth + 1, w));
      SKIFF_RETURN_IF_ERROR(CopyXattrs(s.get(), d.get()));
      SKIFF_RETURN_IF_ERROR(Meta(d.get(), st, w.shift));
    } else if (S_ISREG(st.st_mode)) {
      SKIFF_RETURN_IF_ERROR(CopyFile(src, name, dst, st, w));
    } else if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlinkat(src, name, target, sizeof target - 1);
      if (n < 0) continue;
      target[n] = 0;
      if (::symlinkat(target, dst, name) != 0) return Error::Sys(Code::kS300, "symlink", name, errno);
      if (::fchownat(dst, name, Shift(st.st_uid, w.shift), Shift(st.st_gid, w.shift), AT_SYMLINK_NOFOLLOW) !=
          0)
        return Error::Sys(Code::kS300, "lchown", name, errno);
      timespec times[2] = {st.st_atim, st.st_mtim};
      (void)::utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW);
    } else if ((S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) || S_ISFIFO(st.st_mode)) {
      // A whiteout (a file deleted from a lower layer), or a fifo.
      if (::mknodat(dst, name, st.st_mode & (S_IFMT | 0777), st.st_rdev) != 0)
        return Error::Sys(Code::kS300, "mknod", name, errno);
      if (::fchownat(dst, name, Shift(st.st_uid, w.shift), Shift(st.st_gid, w.shift), AT_SYMLINK_NOFOLLOW) !=
          0)
        return Error::Sys(Code::kS300, "lchown", name, errno);
    }
    // Sockets and device nodes: not state a sandbox can carry over.
  }
  return OkStatus();
}

}  // namespace

Status CopyTree(int src, int dst, IdShift shift, uint64_t max_bytes, uint64_t* bytes) {
  Walk w{shift, max_bytes};
  UniqueFd s(::openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  UniqueFd d(::openat(dst, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!s || !d) return Error::Sys(Code::kS300, "open", "snapshot tree", errno);
  Status st = CopyDir(s.get(), d.get(), 0, w);
  *bytes = w.bytes;
  SKIFF_RETURN_IF_ERROR(st);
  struct stat top {};
  if (::fstat(s.get(), &top) != 0) return Error::Sys(Code::kS300, "fstat", "snapshot tree", errno);
  SKIFF_RETURN_IF_ERROR(CopyXattrs(s.get(), d.get()));
  return Meta(d.get(), top, shift);
}

}  // namespace skiff::jail
