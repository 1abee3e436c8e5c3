// Move-only owners for file descriptors and child processes.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <utility>

namespace skiff {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Runs a callable at scope exit unless cancelled: the scoped cleanup for
// mounts, cgroups and temp dirs that a successful setup keeps.
template <typename F>
class ScopedCleanup {
 public:
  explicit ScopedCleanup(F f) : f_(std::move(f)) {}
  ~ScopedCleanup() {
    if (armed_) f_();
  }
  ScopedCleanup(const ScopedCleanup&) = delete;
  ScopedCleanup& operator=(const ScopedCleanup&) = delete;
  void Cancel() { armed_ = false; }

 private:
  F f_;
  bool armed_ = true;
};

}  // namespace skiff
