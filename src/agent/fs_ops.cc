#include "agent/fs_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <re2/re2.h>

#include "agent/text_util.h"
#include "base/text.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

// Deeper trees are not walked further (each level holds one fd).
constexpr int kMaxDepth = 256;
// sed reads each file whole; larger files get a per-file error.
constexpr size_t kSedMaxFile = 64u << 20;
// grep skips lines longer than this (they are consumed, not buffered).
constexpr size_t kGrepMaxLine = 4u << 20;
// grep stops (truncated:true) once its answer would exceed this many bytes,
// whatever max_matches says: the agent's memory stays bounded.
constexpr size_t kGrepMaxAnswer = 64u << 20;

std::string RandomSuffix() {
  static std::mt19937_64 rng{std::random_device{}()};
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(rng()));
  return b;
}

Result<std::vector<std::string>> ReqStrings(const json& req, const char* key) {
  std::vector<std::string> out;
  if (!req.contains(key) || req[key].is_null()) return out;
  if (!req[key].is_array()) return InvalidRequest(std::string(key) + ": expected an array of strings");
  for (const auto& v : req[key]) {
    if (!v.is_string()) return InvalidRequest(std::string(key) + ": expected an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<uint32_t> ReqMode(const json& req, const char* key, std::optional<uint32_t> def) {
  if (!req.contains(key) || req[key].is_null()) {
    if (def) return *def;
    return InvalidRequest(std::string(key) + ": required");
  }
  auto m = ModeFromJson(req[key]);
  if (!m) return Error(Code::kS210, "invalid octal mode: " + req[key].dump());
  return *m;
}

Status CheckPath(const std::string& p, const char* key) {
  if (p.empty()) return InvalidRequest(std::string(key) + ": must not be empty");
  if (p.find('\0') != std::string::npos) return InvalidRequest(std::string(key) + ": contains NUL");
  return OkStatus();
}

struct DirEntry {
  std::string name;
};

// Names in a directory (without . and ..), sorted byte-wise.
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
    std::string rel = prefix.empty() ? name : prefix + "/" + name;
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

// The root of a grep/sed walk.
struct WalkRoot {
  bool is_dir = false;
  UniqueFd dir;  // is_dir
};

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
    return Error(Code::kS210, "recursive is false but " + path +
                                  " is a directory; pass a file, or set recursive to true");
  r.is_dir = true;
  r.dir.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!r.dir) return FsError(errno, path);
  return r;
}

Status ReadAll(int fd, std::string& out, size_t cap) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(Code::kS216, std::string("read: ") + std::string(ErrnoName(errno)));
    if (n == 0) return OkStatus();
    if (out.size() + static_cast<size_t>(n) > cap)
      return Error(Code::kS216, "file larger than " + std::to_string(cap) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
}

// Removes everything below dirfd (never following links), then nothing else.
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

// Copies `sname` in sdir to `dname` in ddir (files, dirs, links, specials),
// keeping modes and owners; never follows links. For mv across filesystems.
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
    (void)::fchownat(ddir, dname, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (::mkdirat(ddir, dname, 0700) < 0) return errno;
    UniqueFd s(::openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd d(::openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!s || !d) return errno;
    for (const auto& name : ListNames(s.get()))
      if (int e = CopyTreeAt(s.get(), name.c_str(), d.get(), name.c_str(), depth + 1)) return e;
    (void)::fchown(d.get(), st.st_uid, st.st_gid);
    if (::fchmod(d.get(), st.st_mode & 07777) < 0) return errno;
    return 0;
  }
  if (S_ISREG(st.st_mode)) {
    UniqueFd s(::openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!s) return errno;
    UniqueFd d(::openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!d) return errno;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(s.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(d.get(), buf + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        off += w;
      }
    }
    (void)::fchown(d.get(), st.st_uid, st.st_gid);
    if (::fchmod(d.get(), st.st_mode & 07777) < 0) return errno;
    return 0;
  }
  // FIFOs, sockets, device nodes.
  if (::mknodat(ddir, dname, st.st_mode, st.st_rdev) < 0) return errno;
  (void)::fchownat(ddir, dname, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
  return 0;
}

// chmod/chown of an O_PATH fd (race-safe: the fd names exactly the inode that
// was checked not to be a link).
int ChangeFd(int fd, uint32_t mode, int64_t uid, int64_t gid) {
  if (uid >= 0 || gid >= 0) {
    if (::fchownat(fd, "", uid >= 0 ? static_cast<uid_t>(uid) : static_cast<uid_t>(-1),
                   gid >= 0 ? static_cast<gid_t>(gid) : static_cast<gid_t>(-1),
                   AT_EMPTY_PATH) < 0)
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

// Creates every missing directory of `path` (0755), the leaf with leaf_mode.
// Returns whether the leaf was created.
Result<bool> MkdirAll(const std::string& path, uint32_t leaf_mode) {
  std::string cur;
  size_t i = 0;
  if (!path.empty() && path[0] == '/') {
    cur = "/";
    i = 1;
  }
  bool created_leaf = false;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    std::string comp = path.substr(i, slash - i);
    i = slash + 1;
    if (comp.empty()) continue;
    if (!cur.empty() && cur.back() != '/') cur.push_back('/');
    cur += comp;
    bool leaf = path.find_first_not_of('/', slash) == std::string::npos;
    struct stat st {};
    if (::stat(cur.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return FsError(ENOTDIR, cur);
      created_leaf = false;
      continue;
    }
    if (errno != ENOENT) return FsError(errno, cur);
    uint32_t m = leaf ? leaf_mode : 0755;
    if (::mkdir(cur.c_str(), m) < 0) {
      if (errno == EEXIST) continue;
      return FsError(errno, cur);
    }
    created_leaf = leaf;
    UniqueFd d(::open(cur.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (d && ::fchmod(d.get(), m) < 0) return FsError(errno, cur);
  }
  return created_leaf;
}

Error MissingParent(const std::string& parent) {
  Error e(Code::kS211, "parent directory not found: " + parent);
  e.set_fix(json{{"parents", true}});
  return e;
}

// Checks the parent of `path` for mkdir/write with parents:false.
Status CheckParent(const std::string& path) {
  std::string parent = ParentOf(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) < 0) {
    if (errno == ENOENT) return MissingParent(parent);
    return FsError(errno, parent);
  }
  if (!S_ISDIR(st.st_mode)) return FsError(ENOTDIR, parent);
  return OkStatus();
}

}  // namespace

Error FsError(int err, std::string_view what) {
  Code c = CodeForErrno(err);
  std::string m(FsPrefix(c));
  m.append(what);
  if (c == Code::kS216) m.append(": ").append(ErrnoName(err));
  return Error(c, std::move(m));
}

Result<std::string> ReqPath(const json& req, const char* key) {
  if (!req.contains(key) || !req[key].is_string())
    return InvalidRequest(std::string(key) + ": expected a string");
  std::string p = req[key].get<std::string>();
  SKIFF_RETURN_IF_ERROR(CheckPath(p, key));
  return p;
}

Result<bool> ReqBool(const json& req, const char* key, bool def) {
  if (!req.contains(key) || req[key].is_null()) return def;
  if (!req[key].is_boolean()) return InvalidRequest(std::string(key) + ": expected a boolean");
  return req[key].get<bool>();
}

Result<int64_t> ReqInt(const json& req, const char* key, int64_t def) {
  if (!req.contains(key) || req[key].is_null()) return def;
  const auto& v = req[key];
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return InvalidRequest(std::string(key) + ": expected an integer");
  return v.get<int64_t>();
}

// ------------------------------------------------------------------ ls/stat

Result<json> FsLs(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK));
  if (!d) {
    int e = errno;
    if (e == ENOTDIR) return Error(Code::kS212, "not a directory or wrong type: not a directory: " + path);
    return FsError(e, path);
  }
  json entries = json::array();
  for (const auto& name : ListNames(d.get())) {
    struct stat st {};
    if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // vanished
    entries.push_back(FsEntryJson(name, st));
  }
  return json{{"entries", std::move(entries)}};
}

Result<json> FsStat(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return FsError(errno, path);
  return FsEntryJson(EntryName(path), st);
}

// ------------------------------------------------------------------ mkdir

Result<json> FsMkdir(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  SKIFF_ASSIGN_OR_RETURN(uint32_t mode, ReqMode(req, "mode", 0755));
  SKIFF_ASSIGN_OR_RETURN(bool parents, ReqBool(req, "parents", false));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 || (errno != ENOENT && ::lstat(path.c_str(), &st) == 0)) {
    if (parents) return json{{"created", false}};
    return FsError(EEXIST, path);
  }
  if (errno == ENOTDIR) return FsError(ENOTDIR, path);
  if (parents) {
    SKIFF_ASSIGN_OR_RETURN(bool created, MkdirAll(path, mode));
    return json{{"created", created}};
  }
  SKIFF_RETURN_IF_ERROR(CheckParent(path));
  if (::mkdir(path.c_str(), mode) < 0) return FsError(errno, path);
  UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) return FsError(errno, path);
  if (::fchmod(d.get(), mode) < 0) return FsError(errno, path);
  return json{{"created", true}};
}

// ------------------------------------------------------------------ rm

Result<json> FsRm(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, ReqBool(req, "recursive", false));
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return FsError(errno, path);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) < 0) return FsError(errno, path);
    return json{{"removed", true}};
  }
  if (!recursive) {
    if (::rmdir(path.c_str()) < 0) {
      int e = errno == EEXIST ? ENOTEMPTY : errno;
      return FsError(e, path);
    }
    return json{{"removed", true}};
  }
  std::string leaf = LeafOf(path);
  if (leaf.empty() || leaf == "." || leaf == "..") {
    // "/" or "x/.": remove the contents, then try the directory itself.
    UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) return FsError(errno, path);
    if (int e = RemoveChildren(d.get(), 0)) return FsError(e, path);
    if (::rmdir(path.c_str()) < 0 && errno != EBUSY && errno != EINVAL) return FsError(errno, path);
    return json{{"removed", true}};
  }
  UniqueFd parent(::open(ParentOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return FsError(errno, path);
  if (int e = RemoveTreeAt(parent.get(), leaf.c_str())) return FsError(e, path);
  return json{{"removed", true}};
}

// ------------------------------------------------------------------ mv

Result<json> FsMv(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string src, ReqPath(req, "src"));
  SKIFF_ASSIGN_OR_RETURN(std::string dst, ReqPath(req, "dst"));
  SKIFF_ASSIGN_OR_RETURN(bool overwrite, ReqBool(req, "overwrite", false));
  struct stat sst {};
  if (::lstat(src.c_str(), &sst) < 0) {
    if (errno == ENOENT) return Error(Code::kS211, "file not found: src " + src);
    return FsError(errno, "src " + src);
  }
  std::string dparent = ParentOf(dst);
  struct stat pst {};
  if (::stat(dparent.c_str(), &pst) < 0) {
    if (errno == ENOENT) return Error(Code::kS211, "file not found: parent of dst " + dst);
    return FsError(errno, "dst " + dst);
  }
  if (!S_ISDIR(pst.st_mode)) return FsError(ENOTDIR, "dst " + dst);
  auto map_err = [&](int e) -> Error {
    if (e == EEXIST && !overwrite) return Error(Code::kS213, "already exists: dst " + dst);
    if (e == EEXIST) e = ENOTEMPTY;
    if (e == ENOTDIR || e == EISDIR || e == ENOTEMPTY) return FsError(e, "dst " + dst);
    return FsError(e, src + " -> " + dst);
  };
  unsigned flags = overwrite ? 0 : RENAME_NOREPLACE;
  if (::renameat2(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), flags) == 0)
    return json{{"moved", true}};
  int e = errno;
  if (e != EXDEV) return map_err(e);

  // Across filesystems: copy to a temporary sibling of dst, rename it into
  // place, then remove src.
  struct stat dst_st {};
  bool dst_exists = ::lstat(dst.c_str(), &dst_st) == 0;
  if (dst_exists && !overwrite) return map_err(EEXIST);
  if (dst_exists) {
    if (S_ISDIR(sst.st_mode) && !S_ISDIR(dst_st.st_mode)) return map_err(ENOTDIR);
    if (!S_ISDIR(sst.st_mode) && S_ISDIR(dst_st.st_mode)) return map_err(EISDIR);
  }
  UniqueFd sdir(::open(ParentOf(src).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  UniqueFd ddir(::open(dparent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!sdir || !ddir) return FsError(errno, src + " -> " + dst);
  std::string sleaf = LeafOf(src), dleaf = LeafOf(dst);
  std::string tmp = ".skiff-mv-" + RandomSuffix();
  if (int ce = CopyTreeAt(sdir.get(), sleaf.c_str(), ddir.get(), tmp.c_str(), 0)) {
    (void)RemoveTreeAt(ddir.get(), tmp.c_str());
    return FsError(ce, src + " -> " + dst);
  }
  if (::renameat2(ddir.get(), tmp.c_str(), ddir.get(), dleaf.c_str(), flags) < 0) {
    int re = errno;
    (void)RemoveTreeAt(ddir.get(), tmp.c_str());
    return map_err(re);
  }
  if (int rm = RemoveTreeAt(sdir.get(), sleaf.c_str())) return FsError(rm, "src " + src);
  return json{{"moved", true}};
}

// ------------------------------------------------------------------ chmod

Result<json> FsChmod(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  SKIFF_ASSIGN_OR_RETURN(uint32_t mode, ReqMode(req, "mode", std::nullopt));
  SKIFF_ASSIGN_OR_RETURN(int64_t uid, ReqInt(req, "uid", -1));
  SKIFF_ASSIGN_OR_RETURN(int64_t gid, ReqInt(req, "gid", -1));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, ReqBool(req, "recursive", false));
  if (req.contains("uid") && !req["uid"].is_null() && (uid < 0 || uid > 0xFFFFFFFE))
    return InvalidRequest("uid: expected an integer >= 0");
  if (req.contains("gid") && !req["gid"].is_null() && (gid < 0 || gid > 0xFFFFFFFE))
    return InvalidRequest("gid: expected an integer >= 0");
  // The root is followed when it is a link.
  UniqueFd root(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!root) return FsError(errno, path);
  struct stat st {};
  if (::fstat(root.get(), &st) < 0) return FsError(errno, path);
  if (int e = ChangeFd(root.get(), mode, uid, gid)) return FsError(e, path);
  int64_t count = 1;
  if (recursive && S_ISDIR(st.st_mode)) {
    UniqueFd d(::openat(root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d) return FsError(errno, path);
    if (int e = ChmodChildren(d.get(), mode, uid, gid, 0, count)) return FsError(e, path);
  }
  return json{{"updated", count}};
}

// ------------------------------------------------------------------ grep

namespace {

// Streams a file's lines; skips binary files (NUL in the first 8192 bytes).
// on_line(content, line_no, offset) returns false to stop. Lines longer than
// kGrepMaxLine are consumed without being buffered and are not reported.
template <typename F>
bool ScanLines(int fd, F&& on_line) {
  std::string buf;
  buf.reserve(65536);
  char chunk[65536];
  bool checked_binary = false;
  bool eof = false;
  uint64_t line_no = 0, base = 0;  // base = file offset of buf[0]
  bool skipping = false;           // inside an over-long line
  while (!eof) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // unreadable mid-way: stop this file silently
    if (n == 0) eof = true;
    buf.append(chunk, static_cast<size_t>(n));
    if (!checked_binary) {
      if (buf.size() < 8192 && !eof) continue;
      if (std::memchr(buf.data(), '\0', std::min<size_t>(buf.size(), 8192)) != nullptr) return true;
      checked_binary = true;
    }
    size_t start = 0;
    for (;;) {
      size_t nl = buf.find('\n', start);
      if (nl == std::string::npos) {
        if (eof && start < buf.size()) nl = buf.size();
        else break;
      }
      ++line_no;
      if (!skipping) {
        std::string_view line(buf.data() + start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!on_line(line, line_no, base + start)) return false;
      }
      skipping = false;
      start = nl + 1;
      if (start > buf.size()) start = buf.size();
    }
    buf.erase(0, start);
    base += start;
    if (buf.size() > kGrepMaxLine) {  // drop an over-long line's head
      base += buf.size();
      buf.clear();
      skipping = true;
    }
  }
  return true;
}

std::unique_ptr<RE2> Compile(const std::string& pattern, bool ignore_case, bool literal) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_case_sensitive(!ignore_case);
  o.set_literal(literal);
  o.set_max_mem(64 << 20);
  return std::make_unique<RE2>(pattern, o);
}

}  // namespace

Result<json> FsGrep(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
  if (!req.contains("pattern") || !req["pattern"].is_string())
    return InvalidRequest("pattern: expected a string");
  std::string pattern = req["pattern"].get<std::string>();
  SKIFF_ASSIGN_OR_RETURN(bool recursive, ReqBool(req, "recursive", true));
  SKIFF_ASSIGN_OR_RETURN(bool ignore_case, ReqBool(req, "ignore_case", false));
  SKIFF_ASSIGN_OR_RETURN(auto include, ReqStrings(req, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(auto exclude, ReqStrings(req, "exclude_glob"));
  SKIFF_ASSIGN_OR_RETURN(int64_t max_matches, ReqInt(req, "max_matches", 10000));
  SKIFF_ASSIGN_OR_RETURN(int64_t max_line, ReqInt(req, "max_line_bytes", 4096));
  if (max_matches < 0) return InvalidRequest("max_matches: expected an integer >= 0");
  if (max_line < 0) return InvalidRequest("max_line_bytes: expected an integer >= 0");
  auto re = Compile(pattern, ignore_case, false);
  if (!re->ok()) return Error(Code::kS217, "invalid regex pattern: " + re->error());

  json matches = json::array();
  bool truncated = false;
  size_t answer_bytes = 0;
  auto scan = [&](int fd, const std::string& shown) {
    return ScanLines(fd, [&](std::string_view line, uint64_t no, uint64_t off) {
      if (!IsValidUtf8(line)) return true;
      re2::StringPiece m;
      if (!re->Match(line, 0, line.size(), RE2::UNANCHORED, &m, 1)) return true;
      if ((max_matches > 0 && static_cast<int64_t>(matches.size()) >= max_matches) ||
          answer_bytes > kGrepMaxAnswer) {
        truncated = true;
        return false;
      }
      std::string content = CutUtf8(line, static_cast<size_t>(max_line));
      answer_bytes += content.size() + shown.size() + 64;
      matches.push_back(json{{"path", shown},
                             {"line", no},
                             {"content", std::move(content)},
                             {"byte_offset", off + static_cast<uint64_t>(m.data() - line.data())}});
      return true;
    });
  };
  SKIFF_ASSIGN_OR_RETURN(WalkRoot root, OpenWalkRoot(path, recursive));
  if (!root.is_dir) {
    if (!GlobSelected(include, exclude, LeafOf(path))) return json{{"matches", matches}, {"truncated", false}};
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) return FsError(errno, path);
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) scan(fd.get(), path);
  } else {
    WalkFiles(root.dir.get(), "", 0, [&](const std::string& rel, int dirfd, const std::string& name) {
      if (!GlobSelected(include, exclude, rel)) return true;
      UniqueFd fd(OpenRegularAt(dirfd, name.c_str(), false));
      if (!fd) return true;
      return scan(fd.get(), JoinPath(path, rel));
    });
  }
  return json{{"matches", std::move(matches)}, {"truncated", truncated}};
}

// ------------------------------------------------------------------ sed

namespace {

// Replaces in one line. Returns the number of replacements; `budget` < 0 is
// unlimited, else the most replacements allowed.
int64_t ReplaceLine(const RE2& re, std::string_view line, std::string_view repl, bool literal,
                    int64_t budget, std::string& out) {
  int ngroups = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sp(static_cast<size_t>(ngroups));
  const auto& names = re.NamedCapturingGroups();
  auto named = [&](std::string_view n) -> std::optional<int> {
    auto it = names.find(std::string(n));
    if (it == names.end()) return std::nullopt;
    return it->second;
  };
  int64_t count = 0;
  size_t pos = 0, copied = 0;
  size_t last_end = std::string_view::npos;
  while (pos <= line.size() && (budget < 0 || count < budget)) {
    if (!re.Match(line, pos, line.size(), RE2::UNANCHORED, sp.data(), ngroups)) break;
    size_t start = static_cast<size_t>(sp[0].data() - line.data());
    size_t end = start + sp[0].size();
    if (start == end && start == last_end) {
      // An empty match right after the previous match is not a new match.
      if (start >= line.size()) break;
      pos = start + Utf8CharLen(line, start);
      continue;
    }
    out.append(line.substr(copied, start - copied));
    if (literal) {
      out.append(repl);
    } else {
      std::vector<std::string_view> groups;
      groups.reserve(sp.size());
      for (const auto& g : sp) groups.emplace_back(g.data() == nullptr ? std::string_view() : std::string_view(g.data(), g.size()));
      ExpandReplacement(repl, groups, named, out);
    }
    ++count;
    copied = end;
    last_end = end;
    if (start == end) {
      if (end >= line.size()) break;
      size_t n = Utf8CharLen(line, end);
      out.append(line.substr(end, n));
      copied = end + n;
      pos = end + n;
    } else {
      pos = end;
    }
  }
  out.append(line.substr(copied));
  return count;
}

// Edits one file; the per-file result object.
json SedFile(const std::string& shown, const std::string& open_path, const RE2& re,
             std::string_view repl, bool literal, bool first_only, int64_t& total) {
  auto fail = [&](const Error& e) {
    return json{{"path", shown}, {"replacements", 0}, {"success", false}, {"error", e.message()}};
  };
  UniqueFd fd(::open(open_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return fail(FsError(errno, shown));
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0) return fail(FsError(errno, shown));
  if (S_ISDIR(st.st_mode)) return fail(FsError(EISDIR, shown));
  if (!S_ISREG(st.st_mode)) return fail(Error(Code::kS212, "not a directory or wrong type: not a regular file: " + shown));
  std::string text;
  if (auto s = ReadAll(fd.get(), text, kSedMaxFile); !s.ok())
    return fail(Error(Code::kS216, "fs i/o error: " + shown + ": " + s.error().message()));
  fd.reset();
  if (!IsValidUtf8(text)) return fail(Error(Code::kS216, "fs i/o error: not valid UTF-8: " + shown));
  std::string out;
  out.reserve(text.size());
  int64_t count = 0;
  for (const Line& l : SplitLines(text)) {
    int64_t budget = first_only ? 1 - count : -1;
    if (budget == 0) {
      out.append(l.content);
    } else {
      count += ReplaceLine(re, l.content, repl, literal, budget, out);
    }
    out.append(l.terminator);
  }
  if (count == 0) return json{{"path", shown}, {"replacements", 0}, {"success", true}};
  // A link is resolved: its target is rewritten, the link stays.
  std::string target = open_path;
  if (char* real = ::realpath(open_path.c_str(), nullptr)) {
    target = real;
    std::free(real);
  }
  auto w = AtomicWrite::BeginReplace(target);
  if (!w.ok()) return fail(w.error());
  if (auto s = w->Append(out); !s.ok()) return fail(s.error());
  if (auto s = w->Commit(); !s.ok()) return fail(s.error());
  total += count;
  return json{{"path", shown}, {"replacements", count}, {"success", true}};
}

}  // namespace

Result<json> FsSed(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(auto files, ReqStrings(req, "files"));
  bool has_path = req.contains("path") && !req["path"].is_null();
  if (!files.empty() && has_path) return Error(Code::kS210, "sed: give files or path, not both");
  if (files.empty() && !has_path) return Error(Code::kS210, "sed: one of files or path is required");
  if (!req.contains("pattern") || !req["pattern"].is_string())
    return InvalidRequest("pattern: expected a string");
  if (!req.contains("replacement") || !req["replacement"].is_string())
    return InvalidRequest("replacement: expected a string");
  std::string pattern = req["pattern"].get<std::string>();
  std::string repl = req["replacement"].get<std::string>();
  if (pattern.empty()) return Error(Code::kS210, "sed: pattern must not be empty");
  SKIFF_ASSIGN_OR_RETURN(bool regex, ReqBool(req, "regex", true));
  SKIFF_ASSIGN_OR_RETURN(bool first_only, ReqBool(req, "first_only", false));
  SKIFF_ASSIGN_OR_RETURN(bool ignore_case, ReqBool(req, "ignore_case", false));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, ReqBool(req, "recursive", true));
  SKIFF_ASSIGN_OR_RETURN(auto include, ReqStrings(req, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(auto exclude, ReqStrings(req, "exclude_glob"));
  auto re = Compile(pattern, ignore_case, !regex);
  if (!re->ok()) return Error(Code::kS217, "invalid regex pattern: " + re->error());

  json results = json::array();
  int64_t total = 0;
  if (!files.empty()) {
    for (const auto& f : files) {
      if (f.empty() || f.find('\0') != std::string::npos) {
        results.push_back(json{{"path", f}, {"replacements", 0}, {"success", false},
                               {"error", "invalid request: files: empty path or NUL byte"}});
        continue;
      }
      results.push_back(SedFile(f, f, *re, repl, !regex, first_only, total));
    }
  } else {
    SKIFF_ASSIGN_OR_RETURN(std::string path, ReqPath(req, "path"));
    SKIFF_ASSIGN_OR_RETURN(WalkRoot root, OpenWalkRoot(path, recursive));
    if (!root.is_dir) {
      if (GlobSelected(include, exclude, LeafOf(path)))
        results.push_back(SedFile(path, path, *re, repl, !regex, first_only, total));
    } else {
      // Collect first, then edit: rewriting creates temp files in the tree.
      std::vector<std::string> rels;
      WalkFiles(root.dir.get(), "", 0, [&](const std::string& rel, int, const std::string&) {
        if (GlobSelected(include, exclude, rel)) rels.push_back(rel);
        return true;
      });
      for (const auto& rel : rels) {
        std::string shown = JoinPath(path, rel);
        results.push_back(SedFile(shown, shown, *re, repl, !regex, first_only, total));
      }
    }
  }
  return json{{"results", std::move(results)}, {"total_replacements", total}};
}

// ------------------------------------------------------------------ write

AtomicWrite::AtomicWrite(AtomicWrite&& o) noexcept
    : path_(std::move(o.path_)), dir_(std::move(o.dir_)), leaf_(std::move(o.leaf_)),
      tmp_(std::move(o.tmp_)), fd_(std::move(o.fd_)), mode_(o.mode_), keep_owner_(o.keep_owner_),
      uid_(o.uid_), gid_(o.gid_), written_(o.written_), done_(o.done_) {
  o.done_ = true;
}

AtomicWrite::~AtomicWrite() { Abort(); }

void AtomicWrite::Abort() {
  if (done_) return;
  done_ = true;
  fd_.reset();
  if (dir_ && !tmp_.empty()) (void)::unlinkat(dir_.get(), tmp_.c_str(), 0);
}

Result<AtomicWrite> AtomicWrite::Begin(const std::string& path, uint32_t mode, bool parents) {
  AtomicWrite w;
  w.path_ = path;
  w.mode_ = mode;
  w.leaf_ = LeafOf(path);
  if (w.leaf_.empty() || w.leaf_ == "." || w.leaf_ == "..") return FsError(EISDIR, path);
  std::string parent = ParentOf(path);
  if (parents) {
    SKIFF_ASSIGN_OR_RETURN(bool created, MkdirAll(parent, 0755));
    (void)created;
  } else {
    SKIFF_RETURN_IF_ERROR(CheckParent(path));
  }
  // The parent is followed (spec §3.0); the leaf is acted on via *at().
  w.dir_.reset(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!w.dir_) {
    if (errno == ENOENT && !parents) return MissingParent(parent);
    return FsError(errno, parent);
  }
  struct stat st {};
  if (::fstatat(w.dir_.get(), w.leaf_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return FsError(EISDIR, path);
    if (S_ISREG(st.st_mode)) {
      w.keep_owner_ = true;
      w.uid_ = st.st_uid;
      w.gid_ = st.st_gid;
    }
  }
  w.tmp_ = ".skiff-w-" + RandomSuffix();
  w.fd_.reset(::openat(w.dir_.get(), w.tmp_.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!w.fd_) {
    int e = errno;
    w.tmp_.clear();
    w.done_ = true;
    return FsError(e, path);
  }
  return w;
}

Result<AtomicWrite> AtomicWrite::BeginReplace(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return FsError(errno, path);
  SKIFF_ASSIGN_OR_RETURN(AtomicWrite w, Begin(path, st.st_mode & 07777, false));
  w.keep_owner_ = true;
  w.uid_ = st.st_uid;
  w.gid_ = st.st_gid;
  return w;
}

Status AtomicWrite::Append(std::string_view bytes) {
  if (done_) return Error(Code::kS216, "fs i/o error: write already finished: " + path_);
  while (!bytes.empty()) {
    ssize_t n = ::write(fd_.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      Abort();
      return FsError(e, path_);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

Status AtomicWrite::Commit() {
  if (done_) return Error(Code::kS216, "fs i/o error: write already finished: " + path_);
  auto fail = [&](int e) -> Status {
    Abort();
    return FsError(e, path_);
  };
  // chown before chmod: chown clears set-id bits.
  if (keep_owner_ && ::fchown(fd_.get(), uid_, gid_) < 0) return fail(errno);
  if (::fchmod(fd_.get(), mode_) < 0) return fail(errno);
  if (::fsync(fd_.get()) < 0) return fail(errno);
  if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), leaf_.c_str()) < 0) return fail(errno);
  done_ = true;
  fd_.reset();
  return OkStatus();
}

// ------------------------------------------------------------------ read

Result<ReadHandle> OpenForRead(const std::string& path) {
  ReadHandle h;
  h.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!h.fd) {
    int e = errno;
    if (e == EISDIR) return Error(Code::kS212, "not a directory or wrong type: is a directory: " + path);
    return FsError(e, path);
  }
  struct stat st {};
  if (::fstat(h.fd.get(), &st) < 0) return FsError(errno, path);
  if (S_ISDIR(st.st_mode)) return Error(Code::kS212, "not a directory or wrong type: is a directory: " + path);
  if (!S_ISREG(st.st_mode))
    return Error(Code::kS212, "not a directory or wrong type: not a regular file: " + path);
  int fl = ::fcntl(h.fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(h.fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  h.meta = json{{"size", static_cast<int64_t>(st.st_size)},
                {"mode", ModeString(st.st_mode)},
                {"mtime", static_cast<int64_t>(st.st_mtim.tv_sec)}};
  return h;
}

}  // namespace skiff::agent
