// PeerHungUp: a connected peer is there, with or without unread data; it is
// gone once it closed, or shut down its sending side; over unix and TCP.
#include "base/peer_hangup.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/unique_fd.h"

namespace skiff {
namespace {

struct Pair {
  UniqueFd ours, theirs;
};

Pair UnixPair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

Pair TcpPair() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  UniqueFd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  return {std::move(server), std::move(client)};
}

void Exercise(Pair (*make)()) {
  {
    Pair p = make();
    EXPECT_FALSE(PeerHungUp(p.ours.get()));
    ASSERT_EQ(::write(p.theirs.get(), "GET", 3), 3);  // unread data is no hang-up
    EXPECT_FALSE(PeerHungUp(p.ours.get()));
    p.theirs.reset();
    for (int i = 0; i < 100 && !PeerHungUp(p.ours.get()); ++i) ::usleep(10000);
    EXPECT_TRUE(PeerHungUp(p.ours.get())) << "a closed peer";
  }
  {
    Pair p = make();
    ASSERT_EQ(::shutdown(p.theirs.get(), SHUT_WR), 0);
    for (int i = 0; i < 100 && !PeerHungUp(p.ours.get()); ++i) ::usleep(10000);
    EXPECT_TRUE(PeerHungUp(p.ours.get())) << "a peer that shut down its sending side";
  }
}

TEST(PeerHungUp, UnixStreamSockets) { Exercise(UnixPair); }
TEST(PeerHungUp, TcpLoopback) { Exercise(TcpPair); }

TEST(PeerHungUp, AClosedDescriptorCountsAsGone) {
  Pair p = UnixPair();
  int fd = p.ours.get();
  p.ours.reset();
  EXPECT_TRUE(PeerHungUp(fd));
}

}  // namespace
}  // namespace skiff
