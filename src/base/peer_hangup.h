// Whether the peer of a connected stream socket (TCP or unix) is gone,
// asked without reading from it: it closed the connection or shut down its
// sending side (POLLRDHUP), or the connection broke (POLLHUP, POLLERR).
// Unread data waiting on the socket does not count. A server streaming a
// long answer uses it to notice a client that left while there is nothing
// to write (the write that would tell comes only with the next output).
#pragma once

namespace skiff {

bool PeerHungUp(int socket_fd);

}  // namespace skiff
