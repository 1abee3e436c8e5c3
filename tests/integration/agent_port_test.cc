// skiff-agent's port.connect, run as PID 1 of a private PID and mount
// namespace. The harness shares the host's network namespace, so the
// servers the agent dials listen in this test process, on loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "agent_harness.h"
#include "base/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace skiff::agent_test {
namespace {

using Clock = std::chrono::steady_clock;

// A socket bound to a free port of `family`'s loopback; listening when
// `listen` is set (otherwise a connect to it is refused).
struct Bound {
  UniqueFd fd;
  uint16_t port = 0;
};
std::optional<Bound> BindLoopback(int family, bool listen) {
  Bound b;
  b.fd.reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!b.fd) return std::nullopt;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    int only = 1;
    ::setsockopt(b.fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof only);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  }
  if (::bind(b.fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return std::nullopt;
  if (listen && ::listen(b.fd.get(), 4) != 0) return std::nullopt;
  if (::getsockname(b.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  b.port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                    : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return b;
}

// Accepts one connection, reads it to its end (`got`; a read that waits
// 20 s is not an end: `*eof` stays false), answers "echo:" and what it
// read, then closes.
std::thread EchoServer(int listen_fd, std::string* got, bool* eof = nullptr) {
  return std::thread([listen_fd, got, eof] {
    UniqueFd c(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) return;
    timeval tv{20, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(c.get(), buf, sizeof buf);
      if (n < 0) return;  // timed out: no end seen
      if (n == 0) break;
      got->append(buf, static_cast<size_t>(n));
    }
    if (eof != nullptr) *eof = true;
    std::string answer = "echo:" + *got;
    for (size_t at = 0; at < answer.size();) {
      ssize_t n = ::write(c.get(), answer.data() + at, answer.size() - at);
      if (n <= 0) return;
      at += static_cast<size_t>(n);
    }
  });
}

struct Relayed {
  std::optional<json> meta;
  std::string out;
  bool ended = false;
  proto::Event final;
};

Relayed Relay(proto::Client& client, json req, const std::string& send) {
  Relayed r;
  auto s = client.Open(req);
  if (!s.ok()) return r;
  auto deadline = Clock::now() + 60s;
  auto first = (*s)->Next(deadline);
  if (!first) return r;
  if (first->kind != proto::Event::Kind::kMeta) {
    r.final = *first;
    return r;
  }
  r.meta = first->json;
  EXPECT_TRUE((*s)->Send(proto::kStdin, send, deadline).ok());
  EXPECT_TRUE((*s)->End(proto::kStdin).ok());
  for (;;) {
    auto e = (*s)->Next(deadline);
    if (!e) return r;
    if (e->kind == proto::Event::Kind::kData) {
      EXPECT_EQ(e->channel, proto::kStdout);
      r.out += e->data;
    } else if (e->kind == proto::Event::Kind::kEnd) {
      r.ended = true;
    } else if (e->kind != proto::Event::Kind::kMeta) {
      r.final = *e;
      return r;
    }
  }
}

class AgentPort : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, mounts)";
    sb_ = AgentSandbox::Start();
    ASSERT_NE(sb_, nullptr);
  }
  std::unique_ptr<AgentSandbox> sb_;
};

TEST_F(AgentPort, RelaysBothWaysUnderCreditAndCountsTheBytes) {
  const json& h = sb_->client().hello();
  EXPECT_NE(std::find(h["ops"].begin(), h["ops"].end(), "port.connect"), h["ops"].end());
  auto server = BindLoopback(AF_INET, true);
  ASSERT_TRUE(server);
  std::string got;
  std::thread t = EchoServer(server->fd.get(), &got);
  // More than the initial window each way: credit must come back both ways.
  std::string big(3u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  Relayed r = Relay(sb_->client(), proto::PortConnectRequest{server->port}.ToJson(), big);
  t.join();
  ASSERT_TRUE(r.meta) << r.final.json.dump();
  EXPECT_EQ((*r.meta)["address"], "127.0.0.1");
  EXPECT_EQ(got.size(), big.size());
  EXPECT_TRUE(got == big) << "the server got the host's bytes in order";
  EXPECT_TRUE(r.out == "echo:" + big) << "the host got the server's bytes in order";
  EXPECT_TRUE(r.ended) << "the server's end is END on stdout";
  ASSERT_EQ(r.final.kind, proto::Event::Kind::kResult) << r.final.json.dump();
  auto result = proto::PortConnectResult::FromJson(r.final.json);
  ASSERT_TRUE(result.ok()) << r.final.json.dump();
  EXPECT_EQ(result->bytes_in, static_cast<int64_t>(big.size()));
  EXPECT_EQ(result->bytes_out, static_cast<int64_t>(big.size() + 5));
}

TEST_F(AgentPort, FallsBackToIpv6Loopback) {
  auto server = BindLoopback(AF_INET6, true);
  if (!server) GTEST_SKIP() << "no IPv6 loopback here";
  // Nothing on 127.0.0.1 at that port (it is only bound on ::1).
  std::string got;
  std::thread t = EchoServer(server->fd.get(), &got);
  Relayed r = Relay(sb_->client(), proto::PortConnectRequest{server->port}.ToJson(), "ping");
  t.join();
  ASSERT_TRUE(r.meta) << r.final.json.dump();
  EXPECT_EQ((*r.meta)["address"], "::1");
  EXPECT_EQ(r.out, "echo:ping");
  EXPECT_EQ(r.final.kind, proto::Event::Kind::kResult);
}

TEST_F(AgentPort, NothingListeningIsS222AndTheChannelKeepsServing) {
  // Bound (so no one else takes the port) but not listening: refused.
  auto closed = BindLoopback(AF_INET, false);
  ASSERT_TRUE(closed);
  auto e = sb_->CallRaw(proto::PortConnectRequest{closed->port}.ToJson());
  ASSERT_EQ(e.kind, proto::Event::Kind::kError) << e.json.dump();
  EXPECT_EQ(e.json["code"], "S222");
  EXPECT_NE(e.json["message"].get<std::string>().find("nothing listens on port " +
                                                      std::to_string(closed->port) + " in the sandbox"),
            std::string::npos)
      << e.json.dump();
  for (const json& bad :
       {json{{"op", "port.connect"}, {"port", 0}}, json{{"op", "port.connect"}, {"port", 65536}},
        json{{"op", "port.connect"}, {"port", "80"}}, json{{"op", "port.connect"}}}) {
    auto b = sb_->CallRaw(bad);
    ASSERT_EQ(b.kind, proto::Event::Kind::kError) << bad.dump();
    EXPECT_EQ(b.json["code"], "S001") << bad.dump();
  }
  EXPECT_TRUE(sb_->Call({{"op", "info"}}).ok());
}

TEST_F(AgentPort, CancelClosesTheConnection) {
  auto server = BindLoopback(AF_INET, true);
  ASSERT_TRUE(server);
  std::string got;
  bool eof = false;
  std::thread t = EchoServer(server->fd.get(), &got, &eof);
  {
    auto s = sb_->client().Open(proto::PortConnectRequest{server->port}.ToJson());
    ASSERT_TRUE(s.ok());
    auto meta = (*s)->Next(Clock::now() + 60s);
    ASSERT_TRUE(meta);
    ASSERT_EQ(meta->kind, proto::Event::Kind::kMeta);
    ASSERT_TRUE((*s)->Send(proto::kStdin, "half a request", Clock::now() + 60s).ok());
    (*s)->Cancel();
  }
  t.join();
  EXPECT_TRUE(eof) << "the server saw the connection's end without an END from the host";
  // Bytes the agent had not written yet when the CANCEL came are dropped.
  EXPECT_TRUE(got.empty() || got == "half a request") << got;
  EXPECT_TRUE(sb_->Call({{"op", "info"}}).ok());
}

}  // namespace
}  // namespace skiff::agent_test
