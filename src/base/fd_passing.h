// Passing a descriptor over a unix socket (SCM_RIGHTS) with a payload.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>

#include "base/unique_fd.h"

namespace skiff {

// One sendmsg of data[0..len) carrying pass_fd (none if < 0). Returns the
// bytes sent, or -1 with errno set; the descriptor goes with the first byte.
ssize_t SendWithFd(int sock, const void* data, size_t len, int pass_fd, int flags = MSG_NOSIGNAL);

// One recvmsg into data[0..len). A descriptor that came along is stored in
// *fd (close-on-exec); any extra ones are closed. Returns the bytes read, or
// -1 with errno set.
ssize_t RecvWithFd(int sock, void* data, size_t len, UniqueFd* fd);

}  // namespace skiff
