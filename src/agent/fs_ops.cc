#include "agent/fs_ops.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <optional>
#include <string>

#include "agent/file_xattrs.h"
#include "agent/fs_parents.h"
#include "agent/fs_walk.h"
#include "agent/text_util.h"
#include "agent/user_names.h"
#include "base/text.h"
#include "protocol/ops.h"

namespace skiff::agent {

using nlohmann::json;

// ------------------------------------------------------------------ ls/stat

namespace {

static_assert(kMaxIdNameBytes <= proto::FsEntry::kMaxNameBytes, "every name the agent reports is accepted");

// `path` made absolute against the agent's working directory (/ in a sandbox).
std::string Absolute(const std::string& path) {
  if (path.starts_with('/')) return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return JoinPath("/", path);
  return JoinPath(cwd, path);
}

// The text of the link `path` (relative to dirfd); nullopt when unreadable.
std::optional<std::string> LinkText(int dirfd, const char* path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlinkat(dirfd, path, buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// The FsEntry of an lstat result with its owner and group names and, for a
// link, its absolute target. `link` is the entry's path relative to dirfd,
// `abs_dir` the absolute directory holding it.
// `full` is the entry's path (from the working directory), for its metadata.
proto::FsEntry EntryOf(std::string_view name, const struct stat& st, int dirfd, const char* link,
                       std::string_view abs_dir, const std::string& full, UserNames& names) {
  proto::FsEntry e = FsEntryOf(name, st);
  e.owner = names.Owner(e.uid);
  e.group = names.Group(e.gid);
  if (e.is_symlink) {
    if (auto text = LinkText(dirfd, link)) e.symlink_target = LinkTargetPath(abs_dir, *text);
  } else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
    e.metadata = ReadMetadata(full);
  }
  return e;
}

}  // namespace

Result<json> FsLs(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsLsRequest r, proto::FsLsRequest::FromJson(req));
  const std::string& path = r.path;
  UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK));
  if (!d) {
    int e = errno;
    if (e == ENOTDIR) return Error(Code::kS212, "not a directory or wrong type: not a directory: " + path);
    return FsError(e, path);
  }
  proto::FsLsResult out;
  UserNames names;  // this request's: /etc/passwd and /etc/group read once
  const std::string dir = Absolute(path);
  for (const auto& name : ListNames(d.get())) {
    struct stat st {};
    if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // vanished
    out.entries.push_back(EntryOf(name, st, d.get(), name.c_str(), dir, JoinPath(dir, name), names));
  }
  return out.ToJson();
}

Result<json> FsStat(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsStatRequest r, proto::FsStatRequest::FromJson(req));
  struct stat st {};
  if (::lstat(r.path.c_str(), &st) < 0) return FsError(errno, r.path);
  UserNames names;
  return EntryOf(EntryName(r.path), st, AT_FDCWD, r.path.c_str(), ParentOf(Absolute(r.path)), r.path, names)
      .ToJson();
}

// ------------------------------------------------------------------ mkdir

Result<json> FsMkdir(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsMkdirRequest r, proto::FsMkdirRequest::FromJson(req));
  const std::string& path = r.path;
  const uint32_t mode = r.mode;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 || (errno != ENOENT && ::lstat(path.c_str(), &st) == 0)) {
    if (r.parents) return proto::FsMkdirResult{false}.ToJson();
    return FsError(EEXIST, path);
  }
  if (errno == ENOTDIR) return FsError(ENOTDIR, path);
  if (r.parents) {
    SKIFF_ASSIGN_OR_RETURN(bool created, MkdirAll(path, mode));
    return proto::FsMkdirResult{created}.ToJson();
  }
  SKIFF_RETURN_IF_ERROR(CheckParent(path));
  if (::mkdir(path.c_str(), mode) < 0) return FsError(errno, path);
  UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) return FsError(errno, path);
  if (::fchmod(d.get(), mode) < 0) return FsError(errno, path);
  return proto::FsMkdirResult{true}.ToJson();
}

// ------------------------------------------------------------------ rm

Result<json> FsRm(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsRmRequest r, proto::FsRmRequest::FromJson(req));
  const std::string& path = r.path;
  const json removed = proto::FsRmResult{}.ToJson();
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return FsError(errno, path);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) < 0) return FsError(errno, path);
    return removed;
  }
  if (!r.recursive) {
    if (::rmdir(path.c_str()) < 0) {
      int e = errno == EEXIST ? ENOTEMPTY : errno;
      return FsError(e, path);
    }
    return removed;
  }
  std::string leaf = LeafOf(path);
  if (leaf.empty() || leaf == "." || leaf == "..") {
    // "/" or "x/.": remove the contents, then try the directory itself.
    UniqueFd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) return FsError(errno, path);
    if (int e = RemoveChildren(d.get(), 0)) return FsError(e, path);
    if (::rmdir(path.c_str()) < 0 && errno != EBUSY && errno != EINVAL) return FsError(errno, path);
    return removed;
  }
  UniqueFd parent(::open(ParentOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return FsError(errno, path);
  if (int e = RemoveTreeAt(parent.get(), leaf.c_str())) return FsError(e, path);
  return removed;
}

// ------------------------------------------------------------------ mv

Result<json> FsMv(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsMvRequest r, proto::FsMvRequest::FromJson(req));
  const std::string& src = r.src;
  const std::string& dst = r.dst;
  const bool overwrite = r.overwrite;
  const json moved = proto::FsMvResult{}.ToJson();
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
  if (::renameat2(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), flags) == 0) return moved;
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
  return moved;
}

// ------------------------------------------------------------------ chmod

Result<json> FsChmod(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsChmodRequest r, proto::FsChmodRequest::FromJson(req));
  const std::string& path = r.path;
  const uint32_t mode = r.mode;
  const int64_t uid = r.uid ? int64_t{*r.uid} : -1;  // -1: unchanged
  const int64_t gid = r.gid ? int64_t{*r.gid} : -1;
  // The root is followed when it is a link.
  UniqueFd root(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!root) return FsError(errno, path);
  struct stat st {};
  if (::fstat(root.get(), &st) < 0) return FsError(errno, path);
  if (int e = ChangeFd(root.get(), mode, uid, gid)) return FsError(e, path);
  int64_t count = 1;
  if (r.recursive && S_ISDIR(st.st_mode)) {
    UniqueFd d(::openat(root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d) return FsError(errno, path);
    if (int e = ChmodChildren(d.get(), mode, uid, gid, 0, count)) return FsError(e, path);
  }
  return proto::FsChmodResult{count}.ToJson();
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
  if (S_ISDIR(st.st_mode))
    return Error(Code::kS212, "not a directory or wrong type: is a directory: " + path);
  if (!S_ISREG(st.st_mode))
    return Error(Code::kS212, "not a directory or wrong type: not a regular file: " + path);
  int fl = ::fcntl(h.fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(h.fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  h.meta = proto::FsReadMeta{static_cast<int64_t>(st.st_size), ModeString(st.st_mode),
                             static_cast<int64_t>(st.st_mtim.tv_sec)};
  return h;
}

// ------------------------------------------------------------------ table

FsOpFn FindFsOp(std::string_view op) {
  namespace o = proto::op;
  static constexpr struct {
    std::string_view name;
    FsOpFn fn;
  } kOps[] = {{o::kFsLs, FsLs}, {o::kFsStat, FsStat},   {o::kFsMkdir, FsMkdir}, {o::kFsRm, FsRm},
              {o::kFsMv, FsMv}, {o::kFsChmod, FsChmod}, {o::kFsGrep, FsGrep},   {o::kFsSed, FsSed}};
  for (const auto& e : kOps)
    if (e.name == op) return e.fn;
  return nullptr;
}

}  // namespace skiff::agent
