// A child process tracked by pidfd, never by a bare pid that could be reused.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff {

class Process {
 public:
  Process() = default;
  // Takes ownership of a pidfd for `pid` (the caller obtained both, e.g. from
  // clone3 with CLONE_PIDFD or pidfd_open right after fork).
  Process(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  static Result<Process> Open(pid_t pid);

  Process(Process&&) noexcept = default;
  Process& operator=(Process&&) noexcept = default;
  // Kills (SIGKILL) and reaps a still-running child.
  ~Process();

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  bool valid() const { return pidfd_.valid(); }

  Status Signal(int sig) const;
  // Waits up to `timeout` (forever if nullopt). Returns the raw wait status
  // when the process exited, nullopt on timeout.
  Result<std::optional<int>> Wait(std::optional<std::chrono::milliseconds> timeout);
  // SIGTERM, then SIGKILL if it has not exited after `grace`; reaps it either
  // way. Returns the wait status.
  Result<int> Terminate(std::chrono::milliseconds grace);
  bool exited() const { return status_.has_value(); }
  std::optional<int> status() const { return status_; }

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<int> status_;
};

}  // namespace skiff
