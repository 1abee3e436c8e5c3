#include "base/peer_hangup.h"

#include <poll.h>

#include <cerrno>

namespace skiff {

bool PeerHungUp(int socket_fd) {
  pollfd p{socket_fd, POLLRDHUP, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return true;  // not a socket we can ask about (closed): as good as gone
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace skiff
