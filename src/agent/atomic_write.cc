#include "agent/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include "agent/file_xattrs.h"
#include "agent/fs_parents.h"
#include "agent/fs_request.h"
#include "agent/text_util.h"

namespace skiff::agent {

std::string RandomSuffix() {
  // One generator per thread: fs.write runs on the loop while sed and mv
  // run on the FsPool's workers, and a shared engine would be a data race.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(rng()));
  return b;
}

AtomicWrite::AtomicWrite(AtomicWrite&& o) noexcept
    : path_(std::move(o.path_)),
      dir_(std::move(o.dir_)),
      leaf_(std::move(o.leaf_)),
      tmp_(std::move(o.tmp_)),
      fd_(std::move(o.fd_)),
      mode_(o.mode_),
      keep_owner_(o.keep_owner_),
      metadata_(std::move(o.metadata_)),
      uid_(o.uid_),
      gid_(o.gid_),
      written_(o.written_),
      done_(o.done_) {
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
  // The parent is followed (docs/api.md#filesystem-rules-sandboxfs); the leaf is acted on via *at().
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
  w.fd_.reset(
      ::openat(w.dir_.get(), w.tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
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
  if (!metadata_.empty()) {
    if (Status st = WriteMetadata(fd_.get(), metadata_, path_); !st.ok()) {
      Abort();
      return st;
    }
  }
  if (::fsync(fd_.get()) < 0) return fail(errno);
  if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), leaf_.c_str()) < 0) return fail(errno);
  done_ = true;
  fd_.reset();
  return OkStatus();
}

}  // namespace skiff::agent
