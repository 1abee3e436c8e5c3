// An owned directory stream: opendir/fdopendir closed by the destructor.
#pragma once

#include <dirent.h>

#include <string>
#include <utility>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff {

class ScopedDir {
 public:
  ScopedDir() = default;
  ~ScopedDir() { reset(); }
  ScopedDir(ScopedDir&& o) noexcept : dir_(std::exchange(o.dir_, nullptr)) {}
  ScopedDir& operator=(ScopedDir&& o) noexcept {
    if (this != &o) {
      reset();
      dir_ = std::exchange(o.dir_, nullptr);
    }
    return *this;
  }
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;

  static Result<ScopedDir> Open(const std::string& path) {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return Error::Sys(Code::kS300, "opendir", path, errno);
    return ScopedDir(d);
  }
  // Takes `fd` (a directory descriptor); it is closed with the stream.
  static Result<ScopedDir> Adopt(UniqueFd fd, std::string_view what) {
    DIR* d = ::fdopendir(fd.get());
    if (d == nullptr) return Error::Sys(Code::kS300, "fdopendir", what, errno);
    fd.release();
    return ScopedDir(d);
  }

  // The next entry other than "." and "..", or nullptr at the end.
  const dirent* Next() {
    while (dirent* e = ::readdir(dir_)) {
      if (e->d_name[0] == '.' && (e->d_name[1] == 0 || (e->d_name[1] == '.' && e->d_name[2] == 0))) continue;
      return e;
    }
    return nullptr;
  }
  DIR* get() const { return dir_; }
  int fd() const { return ::dirfd(dir_); }

 private:
  explicit ScopedDir(DIR* d) : dir_(d) {}
  void reset() {
    if (dir_ != nullptr) ::closedir(dir_);
    dir_ = nullptr;
  }
  DIR* dir_ = nullptr;
};

}  // namespace skiff
