#include "images/oci.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "base/scoped_dir.h"
#include "base/sha256.h"
#include "base/unique_fd.h"

namespace skiff::images {
namespace {

constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxComponent = 255;
constexpr uint64_t kMaxEntries = 4'000'000;
constexpr int64_t kMaxId = 65535;
constexpr uid_t kOverflowId = 65534;

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveCloser>;

Error Hostile(const std::string& what, const std::string& path) {
  return InvalidRequest("image layer: " + what + ": " + path);
}

Result<ArchivePtr> OpenTar(const std::string& path) {
  ArchivePtr a(archive_read_new());
  if (!a) return Platform("sandbox", "archive_read_new failed");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return InvalidRequest("image layer: cannot open " + path + ": " + archive_error_string(a.get()));
  }
  return a;
}

// Splits an archive path into safe components. A leading '/' is dropped
// (counted in *absolute); "." and empty components are dropped; ".." is
// refused. An empty result means the root itself.
Result<std::vector<std::string>> SplitSafe(const std::string& path, bool* absolute) {
  if (path.size() > kMaxPath) return Hostile("path too long", path.substr(0, 64) + "...");
  if (path.find('\0') != std::string::npos) return Hostile("NUL in path", path);
  *absolute = !path.empty() && path[0] == '/';
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string c = path.substr(i, j - i);
    if (c == "..") return Hostile("'..' component", path);
    if (!c.empty() && c != ".") {
      if (c.size() > kMaxComponent) return Hostile("component too long", path);
      out.push_back(std::move(c));
    }
    i = j + 1;
  }
  return out;
}

// Opens the directory `comps[0..n)` below `root`, never following a symlink.
// With `create`, missing directories are made (0755). Returns an invalid fd
// when a component is missing and !create.
Result<UniqueFd> OpenDirNoFollow(int root, const std::vector<std::string>& comps, size_t n, bool create,
                                 const std::string& for_path) {
  UniqueFd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!cur) return Error::Sys(Code::kS300, "fcntl", for_path, errno);
  for (size_t i = 0; i < n; ++i) {
    int fd = ::openat(cur.get(), comps[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), comps[i].c_str(), 0755) != 0 && errno != EEXIST) {
        return Error::Sys(Code::kS300, "mkdirat", for_path, errno);
      }
      fd = ::openat(cur.get(), comps[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      if (errno == ENOENT && !create) return UniqueFd();
      if (errno == ELOOP || errno == ENOTDIR) {
        return Hostile("parent is a symlink or not a directory", for_path);
      }
      return Error::Sys(Code::kS300, "openat", for_path, errno);
    }
    cur.reset(fd);
  }
  return cur;
}

Status RemoveChildren(int dirfd, const std::string& for_path, int depth);

// Removes `name` in `dirfd` (recursively for a directory), never following
// a symlink. Missing is fine.
Status RemoveAt(int dirfd, const std::string& name, const std::string& for_path, int depth = 0) {
  if (depth > 256) return Hostile("directory tree too deep", for_path);
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return OkStatus();
    return Error::Sys(Code::kS300, "fstatat", for_path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return Error::Sys(Code::kS300, "openat", for_path, errno);
    SKIFF_RETURN_IF_ERROR(RemoveChildren(sub.get(), for_path, depth + 1));
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) {
      return Error::Sys(Code::kS300, "unlinkat", for_path, errno);
    }
    return OkStatus();
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return Error::Sys(Code::kS300, "unlinkat", for_path, errno);
  }
  return OkStatus();
}

Status RemoveChildren(int dirfd, const std::string& for_path, int depth) {
  UniqueFd dup(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dup) return Error::Sys(Code::kS300, "fcntl", for_path, errno);
  SKIFF_ASSIGN_OR_RETURN(ScopedDir d, ScopedDir::Adopt(std::move(dup), for_path));
  std::vector<std::string> names;
  while (const dirent* e = d.Next()) names.push_back(e->d_name);
  for (const auto& n : names) SKIFF_RETURN_IF_ERROR(RemoveAt(dirfd, n, for_path, depth));
  return OkStatus();
}

uid_t ClampId(int64_t id) { return (id < 0 || id > kMaxId) ? kOverflowId : static_cast<uid_t>(id); }

Status WriteData(archive* a, int fd, const std::string& path) {
  const void* buf;
  size_t size;
  la_int64_t offset;
  off_t end = 0;
  for (;;) {
    int r = archive_read_data_block(a, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return InvalidRequest("image layer: reading " + path + ": " + archive_error_string(a));
    }
    const char* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd, p + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::Sys(Code::kS300, "pwrite", path, errno);
      }
      done += static_cast<size_t>(n);
    }
    end = std::max(end, static_cast<off_t>(offset + size));
  }
  if (::ftruncate(fd, end) != 0) return Error::Sys(Code::kS300, "ftruncate", path, errno);
  return OkStatus();
}

}  // namespace

Result<std::string> LayerDiffId(const std::string& layer_path) {
  ArchivePtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  if (archive_read_open_filename(a.get(), layer_path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return InvalidRequest("image layer: cannot open " + layer_path + ": " + archive_error_string(a.get()));
  }
  archive_entry* e;
  Sha256 h;
  if (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    char buf[1 << 16];
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
      if (n < 0) {
        return InvalidRequest("image layer: reading " + layer_path + ": " + archive_error_string(a.get()));
      }
      if (n == 0) break;
      h.Update(buf, static_cast<size_t>(n));
    }
  }
  return "sha256:" + h.HexDigest();
}

Result<LayerReport> ApplyLayer(const std::string& rootfs_dir, const std::string& layer_path) {
  LayerReport rep;
  UniqueFd root(::open(rootfs_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return Error::Sys(Code::kS300, "open", rootfs_dir, errno);
  const bool as_root = ::geteuid() == 0;

  // Pass 1: whiteouts and opaque markers remove what the lower layers hold.
  // They never refer to entries of their own layer, so they go first.
  {
    SKIFF_ASSIGN_OR_RETURN(ArchivePtr a, OpenTar(layer_path));
    archive_entry* e;
    int r;
    uint64_t count = 0;
    while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
      if (++count > kMaxEntries) return Hostile("too many entries", layer_path);
      const char* p = archive_entry_pathname(e);
      if (!p) return Hostile("entry without a name", layer_path);
      std::string path = p;
      bool abs;
      SKIFF_ASSIGN_OR_RETURN(auto comps, SplitSafe(path, &abs));
      if (comps.empty() || !comps.back().starts_with(".wh.")) continue;
      std::string leaf = comps.back();
      const bool opaque = leaf == ".wh..wh..opq";
      if (!opaque && leaf.starts_with(".wh..wh.")) continue;  // other AUFS metadata
      std::string target = opaque ? "" : leaf.substr(4);
      if (!opaque && (target.empty() || target == "." || target == "..")) {
        return Hostile("bad whiteout", path);
      }
      SKIFF_ASSIGN_OR_RETURN(UniqueFd parent,
                             OpenDirNoFollow(root.get(), comps, comps.size() - 1, false, path));
      ++rep.whiteouts;
      if (!parent) continue;  // nothing below to hide
      if (opaque) {
        SKIFF_RETURN_IF_ERROR(RemoveChildren(parent.get(), path, 0));
      } else {
        SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), target, path));
      }
    }
    if (r != ARCHIVE_EOF) {
      return InvalidRequest("image layer: " + layer_path + ": " + archive_error_string(a.get()));
    }
  }

  // Pass 2: create the entries.
  SKIFF_ASSIGN_OR_RETURN(ArchivePtr a, OpenTar(layer_path));
  archive_entry* e;
  int r;
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    std::string path = archive_entry_pathname(e);
    bool abs;
    SKIFF_ASSIGN_OR_RETURN(auto comps, SplitSafe(path, &abs));
    if (comps.empty()) continue;  // the root itself keeps 0755 root:root
    if (comps.back().starts_with(".wh.")) continue;
    ++rep.entries;
    if (abs) ++rep.absolute_paths;
    const std::string& name = comps.back();
    SKIFF_ASSIGN_OR_RETURN(UniqueFd parent, OpenDirNoFollow(root.get(), comps, comps.size() - 1, true, path));
    mode_t type = archive_entry_filetype(e);
    mode_t perm = archive_entry_perm(e) & 07777;
    if (perm & (S_ISUID | S_ISGID)) {
      ++rep.stripped_setid;
      perm &= ~static_cast<mode_t>(S_ISUID | S_ISGID);
    }
    uid_t uid = ClampId(archive_entry_uid(e));
    gid_t gid = ClampId(archive_entry_gid(e));
    struct timespec times[2] = {{archive_entry_mtime(e), 0}, {archive_entry_mtime(e), 0}};

    struct stat st;
    bool exists = ::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;

    if (const char* hl = archive_entry_hardlink(e)) {
      bool tabs;
      SKIFF_ASSIGN_OR_RETURN(auto tcomps, SplitSafe(hl, &tabs));
      if (tcomps.empty()) return Hostile("hard link to the root", path);
      auto tparent = OpenDirNoFollow(root.get(), tcomps, tcomps.size() - 1, false, hl);
      if (!tparent.ok()) return Hostile("hard link target outside the tree", path + " -> " + hl);
      if (!*tparent) return Hostile("hard link target missing", path + " -> " + hl);
      struct stat tst;
      if (::fstatat(tparent->get(), tcomps.back().c_str(), &tst, AT_SYMLINK_NOFOLLOW) != 0 ||
          S_ISDIR(tst.st_mode)) {
        return Hostile("hard link target missing or a directory", path + " -> " + hl);
      }
      if (exists) SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), name, path));
      // linkat without AT_SYMLINK_FOLLOW links a symlink itself, never its target.
      if (::linkat(tparent->get(), tcomps.back().c_str(), parent.get(), name.c_str(), 0) != 0) {
        return Error::Sys(Code::kS300, "linkat", path, errno);
      }
      continue;
    }

    switch (type) {
      case AE_IFDIR: {
        if (exists && !S_ISDIR(st.st_mode)) {
          SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), name, path));
          exists = false;
        }
        if (!exists && ::mkdirat(parent.get(), name.c_str(), 0700) != 0) {
          return Error::Sys(Code::kS300, "mkdirat", path, errno);
        }
        UniqueFd d(::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!d) return Error::Sys(Code::kS300, "openat", path, errno);
        if (as_root && ::fchown(d.get(), uid, gid) != 0) {
          return Error::Sys(Code::kS300, "fchown", path, errno);
        }
        if (::fchmod(d.get(), perm) != 0) return Error::Sys(Code::kS300, "fchmod", path, errno);
        break;
      }
      case AE_IFREG: {
        if (exists) SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), name, path));
        UniqueFd f(
            ::openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!f) return Error::Sys(Code::kS300, "openat", path, errno);
        SKIFF_RETURN_IF_ERROR(WriteData(a.get(), f.get(), path));
        if (as_root && ::fchown(f.get(), uid, gid) != 0) {
          return Error::Sys(Code::kS300, "fchown", path, errno);
        }
        if (::fchmod(f.get(), perm) != 0) return Error::Sys(Code::kS300, "fchmod", path, errno);
        ::futimens(f.get(), times);
        break;
      }
      case AE_IFLNK: {
        const char* target = archive_entry_symlink(e);
        if (!target || !*target || std::strlen(target) > kMaxPath) {
          return Hostile("bad symlink target", path);
        }
        if (exists) SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), name, path));
        // The target is stored verbatim: it is only ever resolved inside the
        // sandbox, and extraction never follows a symlink.
        if (::symlinkat(target, parent.get(), name.c_str()) != 0) {
          return Error::Sys(Code::kS300, "symlinkat", path, errno);
        }
        if (as_root && ::fchownat(parent.get(), name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
          return Error::Sys(Code::kS300, "fchownat", path, errno);
        }
        ::utimensat(parent.get(), name.c_str(), times, AT_SYMLINK_NOFOLLOW);
        break;
      }
      case AE_IFIFO: {
        if (exists) SKIFF_RETURN_IF_ERROR(RemoveAt(parent.get(), name, path));
        if (::mkfifoat(parent.get(), name.c_str(), perm & 0777) != 0) {
          return Error::Sys(Code::kS300, "mkfifoat", path, errno);
        }
        if (as_root && ::fchownat(parent.get(), name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
          return Error::Sys(Code::kS300, "fchownat", path, errno);
        }
        break;
      }
      default:
        // Character and block devices, sockets: never created from an image
        // (the sandbox gets its own minimal /dev).
        ++rep.skipped_devices;
        --rep.entries;
        break;
    }
  }
  if (r != ARCHIVE_EOF) {
    return InvalidRequest("image layer: " + layer_path + ": " + archive_error_string(a.get()));
  }
  return rep;
}

}  // namespace skiff::images
