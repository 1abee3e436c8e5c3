#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/unique_fd.h"

namespace skiff {

Result<std::string> ReadFile(const std::string& path, size_t max, Links links) {
  int flags = O_RDONLY | O_CLOEXEC | (links == Links::kFollow ? 0 : O_NOFOLLOW);
  UniqueFd fd(::open(path.c_str(), flags));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", path, errno);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max) return Error::Sys(Code::kS300, "read", path, EFBIG);
    out.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> ReadFileTail(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::Sys(Code::kS300, "fstat", path, errno);
  auto size = static_cast<size_t>(std::max<off_t>(st.st_size, 0));
  off_t start = static_cast<off_t>(size > max ? size - max : 0);
  std::string out(size - static_cast<size_t>(start), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, start + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", path, errno);
    if (n == 0) break;  // truncated meanwhile
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

Status WriteAll(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "write", what, errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Status WriteFile(const std::string& path, std::string_view data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  SKIFF_RETURN_IF_ERROR(WriteAll(fd.get(), data, path));
  if (::close(fd.release()) != 0) return Error::Sys(Code::kS300, "close", path, errno);
  return OkStatus();
}

Status WriteKnob(const std::string& path, std::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  // A knob write may fail with EINTR when a signal is pending while the
  // kernel works on it (a memory cgroup limit reclaims first): retry it.
  ssize_t n = -1;
  for (int tries = 0; tries < 100; ++tries) {
    n = ::write(fd.get(), value.data(), value.size());
    if (n >= 0 || errno != EINTR) break;
  }
  if (n != static_cast<ssize_t>(value.size()))
    return Error::Sys(Code::kS300, "write", path + " <- " + std::string(value), n < 0 ? errno : EIO);
  return OkStatus();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "mkostemp", tmp, errno);
  ScopedCleanup remove_tmp([&] { ::unlink(tmp.c_str()); });
  if (::fchmod(fd.get(), mode) != 0) return Error::Sys(Code::kS300, "fchmod", tmp, errno);
  SKIFF_RETURN_IF_ERROR(WriteAll(fd.get(), data, tmp));
  if (::fsync(fd.get()) != 0) return Error::Sys(Code::kS300, "fsync", tmp, errno);
  if (::close(fd.release()) != 0) return Error::Sys(Code::kS300, "close", tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::Sys(Code::kS300, "rename", path, errno);
  remove_tmp.Cancel();
  return OkStatus();
}

Status MakeDirs(const std::string& path, mode_t mode, Links links) {
  if (path.empty()) return Error::Sys(Code::kS300, "mkdir", path, ENOENT);
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), mode) == 0) continue;
    int err = errno;
    struct stat st {};
    int rc = links == Links::kFollow ? ::stat(part.c_str(), &st) : ::lstat(part.c_str(), &st);
    if (err == EEXIST && rc == 0) {
      if (!S_ISDIR(st.st_mode)) return Error::Sys(Code::kS300, "mkdir", part, ENOTDIR);
      continue;
    }
    return Error::Sys(Code::kS300, "mkdir", part, err);
  }
  return OkStatus();
}

Status MakeDirsWithMode(const std::string& path, mode_t mode) {
  SKIFF_RETURN_IF_ERROR(MakeDirs(path, mode));
  if (::chmod(path.c_str(), mode) != 0) return Error::Sys(Code::kS300, "chmod", path, errno);
  return OkStatus();
}

}  // namespace skiff
