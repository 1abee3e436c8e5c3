#include "base/pidfd.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace skiff {

Result<Process> Process::Open(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return Error::Sys(Code::kS300, "pidfd_open", std::to_string(pid), errno);
  return Process(pid, UniqueFd(fd));
}

Process::~Process() {
  if (pidfd_.valid() && !status_) {
    (void)Signal(SIGKILL);
    (void)Wait(std::nullopt);
  }
}

Status Process::Signal(int sig) const {
  if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) < 0 && errno != ESRCH)
    return Error::Sys(Code::kS300, "pidfd_send_signal", std::to_string(pid_), errno);
  return OkStatus();
}

Result<std::optional<int>> Process::Wait(std::optional<std::chrono::milliseconds> timeout) {
  if (status_) return status_;
  if (timeout) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    int r;
    do r = ::poll(&p, 1, static_cast<int>(timeout->count()));
    while (r < 0 && errno == EINTR);
    if (r == 0) return std::optional<int>{};
  }
  siginfo_t info{};
  int r;
  do r = ::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED);
  while (r < 0 && errno == EINTR);
  if (r < 0) return Error::Sys(Code::kS300, "waitid", std::to_string(pid_), errno);
  int st = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : info.si_status;
  status_ = st;
  return status_;
}

Result<int> Process::Terminate(std::chrono::milliseconds grace) {
  if (status_) return *status_;
  SKIFF_RETURN_IF_ERROR(Signal(SIGTERM));
  SKIFF_ASSIGN_OR_RETURN(std::optional<int> st, Wait(grace));
  if (st) return *st;
  SKIFF_RETURN_IF_ERROR(Signal(SIGKILL));
  SKIFF_ASSIGN_OR_RETURN(st, Wait(std::nullopt));
  return *st;
}

}  // namespace skiff
