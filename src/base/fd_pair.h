// pipe(2) and socketpair(2) returning owned descriptors.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff {

struct FdPair {
  UniqueFd first;   // a pipe's read end
  UniqueFd second;  // a pipe's write end
};

inline Result<FdPair> MakePipe(int flags = O_CLOEXEC) {
  int fds[2];
  if (::pipe2(fds, flags) != 0) return Error::Sys(Code::kS300, "pipe2", "", errno);
  return FdPair{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

inline Result<FdPair> MakeSocketPair(int type = SOCK_STREAM | SOCK_CLOEXEC) {
  int fds[2];
  if (::socketpair(AF_UNIX, type, 0, fds) != 0)
    return Error::Sys(Code::kS300, "socketpair", "AF_UNIX", errno);
  return FdPair{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace skiff
