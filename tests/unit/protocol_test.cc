#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <thread>

#include "protocol/client.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace skiff::proto {
namespace {

TEST(Frame, RoundTrip) {
  std::string wire = EncodeFrame(7, Type::kData, kStderr, "hello");
  ASSERT_EQ(wire.size(), kHeaderSize + 5);
  Decoder d;
  d.Feed(wire);
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->stream, 7u);
  EXPECT_EQ((*f)->type, Type::kData);
  EXPECT_EQ((*f)->flags, kStderr);
  EXPECT_EQ((*f)->payload, "hello");
}

TEST(Frame, ByteByByteFeedingYieldsSameFrames) {
  std::string wire = EncodeFrame(1, Type::kOpen, 0, R"({"op":"info"})") +
                     EncodeFrame(3, Type::kEnd, kStdin, "") + EncodeCredit(5, kStdout, 4096);
  Decoder d;
  std::vector<Frame> got;
  for (char c : wire) {
    d.Feed(std::string_view(&c, 1));
    for (;;) {
      auto f = d.Next();
      ASSERT_TRUE(f.ok());
      if (!*f) break;
      got.push_back(std::move(**f));
    }
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload, R"({"op":"info"})");
  EXPECT_EQ(got[1].type, Type::kEnd);
  EXPECT_EQ(DecodeCredit(got[2].payload), 4096u);
}

TEST(Frame, HeaderEncodingMatchesAppendFrame) {
  char h[kHeaderSize];
  EncodeHeader(h, 3, 0x01020304, Type::kData, kStdout);
  EXPECT_EQ(std::string(h, kHeaderSize) + "abc", EncodeFrame(0x01020304, Type::kData, kStdout, "abc"));
}

TEST(Frame, PrepareCommitFeedingAcrossCompactionsKeepsEveryByte) {
  // Many 64 KiB frames fed through Prepare/Commit in uneven slices, so the
  // decoder compacts its buffer while a frame is half received.
  std::string wire;
  for (uint32_t i = 0; i < 40; ++i)
    wire += EncodeFrame(i, Type::kData, kStdout, std::string(kChunk, static_cast<char>('a' + i % 26)));
  Decoder d;
  size_t off = 0, slice = 1;
  uint32_t next = 0;
  while (off < wire.size()) {
    size_t n = std::min(wire.size() - off, slice);
    char* room = d.Prepare(n + 100);  // room may exceed what is committed
    std::memcpy(room, wire.data() + off, n);
    d.Commit(n);
    off += n;
    slice = slice * 3 + 7;
    if (slice > 300000) slice = 5;
    for (;;) {
      auto f = d.Next();
      ASSERT_TRUE(f.ok());
      if (!*f) break;
      EXPECT_EQ((*f)->stream, next);
      EXPECT_EQ((*f)->payload, std::string(kChunk, static_cast<char>('a' + next % 26)));
      ++next;
    }
  }
  EXPECT_EQ(next, 40u);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(Frame, TruncatedFrameWaitsForMore) {
  std::string wire = EncodeFrame(1, Type::kData, 0, std::string(100, 'x'));
  Decoder d;
  d.Feed(std::string_view(wire).substr(0, 50));
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  d.Feed(std::string_view(wire).substr(50));
  f = d.Next();
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->payload.size(), 100u);
}

TEST(Frame, OversizedLengthIsACorruptStream) {
  std::string wire = EncodeFrame(1, Type::kData, 0, "");
  wire[0] = wire[1] = wire[2] = wire[3] = '\xff';
  Decoder d;
  d.Feed(wire);
  auto f = d.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code(), Code::kS300);
  EXPECT_NE(f.error().message().find("exceeds the limit"), std::string::npos);
}

TEST(Frame, ReservedBitsAreRejected) {
  std::string wire = EncodeFrame(1, Type::kData, 0, "x");
  wire[11] = 1;
  Decoder d;
  d.Feed(wire);
  EXPECT_FALSE(d.Next().ok());
}

TEST(Frame, UnknownTypeIsReturnedForAPerRequestError) {
  std::string wire = EncodeFrame(9, static_cast<Type>(200), 0, "zz");
  Decoder d;
  d.Feed(wire);
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_FALSE(IsKnownType((*f)->type));
}

TEST(Frame, GarbageNeverCrashes) {
  // Random bytes: the decoder either waits, returns frames, or reports
  // corruption; it never reads out of bounds (run under ASan in CI).
  std::string junk;
  uint32_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1103515245 + 12345;
    junk.push_back(static_cast<char>(x >> 16));
  }
  for (size_t start = 0; start < 64; ++start) {
    Decoder d;
    d.Feed(std::string_view(junk).substr(start));
    for (int n = 0; n < 1000; ++n) {
      auto f = d.Next();
      if (!f.ok() || !*f) break;
    }
  }
}

// A scripted fake agent on the other end of a socketpair.
class FakeAgent {
 public:
  explicit FakeAgent(int fd) : fd_(fd) {}
  void Send(const std::string& bytes) {
    ASSERT_EQ(::write(fd_, bytes.data(), bytes.size()), ssize_t(bytes.size()));
  }
  Frame Read() {
    for (;;) {
      auto f = dec_.Next();
      EXPECT_TRUE(f.ok());
      if (*f) return std::move(**f);
      char buf[65536];
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return Frame{0, static_cast<Type>(0), 0, ""};
      dec_.Feed(std::string_view(buf, n));
    }
  }
  int fd_;
  Decoder dec_;
};

// A client connected to a peer that has sent its HELLO; *peer is the
// agent's end of the socketpair.
std::shared_ptr<Client> HandshakenClient(int* peer) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::string h = EncodeFrame(0, Type::kHello, 0, R"({"proto":1})");
  EXPECT_EQ(write(sv[1], h.data(), h.size()), ssize_t(h.size()));
  *peer = sv[1];
  auto c = Client::Connect(UniqueFd(sv[0]), std::chrono::seconds(5));
  EXPECT_TRUE(c.ok());
  return c.ok() ? *c : nullptr;
}

TEST(Client, HandshakeCallAndUnknownOp) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  FakeAgent agent(sv[1]);
  std::thread t([&] {
    agent.Send(EncodeFrame(0, Type::kHello, 0, R"({"proto":1,"agent":"fake"})"));
    Frame hello = agent.Read();
    EXPECT_EQ(hello.type, Type::kHello);
    Frame open = agent.Read();
    EXPECT_EQ(open.type, Type::kOpen);
    Frame end = agent.Read();
    EXPECT_EQ(end.type, Type::kEnd);
    agent.Send(
        EncodeFrame(open.stream, Type::kError, 0,
                    R"({"code":"S219","message":"operation not supported by this sandbox's agent: nope"})"));
    Frame open2 = agent.Read();
    agent.Read();  // END
    agent.Send(EncodeFrame(open2.stream, Type::kResult, 0, R"({"ok":true})"));
  });
  auto c = Client::Connect(UniqueFd(sv[0]), std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  auto r = (*c)->Call({{"op", "nope"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS219);
  auto r2 = (*c)->Call({{"op", "info"}});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)["ok"], true);
  t.join();
  close(sv[1]);
}

// A hostile agent answers with a RESULT nested 400,000 levels deep (800 KB,
// within the frame limit): the call fails with S300 and the host lives on.
TEST(Client, ADeeplyNestedResultFromTheAgentIsRefused) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  FakeAgent agent(sv[1]);
  std::thread t([&] {
    agent.Send(EncodeFrame(0, Type::kHello, 0, R"({"proto":1})"));
    agent.Read();  // HELLO
    Frame open = agent.Read();
    agent.Read();  // END
    agent.Send(
        EncodeFrame(open.stream, Type::kResult, 0, std::string(400000, '[') + std::string(400000, ']')));
    Frame open2 = agent.Read();
    agent.Read();  // END
    agent.Send(EncodeFrame(open2.stream, Type::kResult, 0, R"({"ok":true})"));
  });
  auto c = Client::Connect(UniqueFd(sv[0]), std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  auto r = (*c)->Call({{"op", "info"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300) << r.error().ToString();
  auto r2 = (*c)->Call({{"op", "info"}});  // the channel still works
  ASSERT_TRUE(r2.ok()) << r2.error().ToString();
  t.join();
  close(sv[1]);
}

TEST(Client, WrongProtocolVersionFailsHandshake) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::string h = EncodeFrame(0, Type::kHello, 0, R"({"proto":99})");
  ASSERT_EQ(write(sv[1], h.data(), h.size()), ssize_t(h.size()));
  auto c = Client::Connect(UniqueFd(sv[0]), std::chrono::seconds(5));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kS300);
  close(sv[1]);
}

TEST(Client, SendBlocksWithoutCreditAndResumesWhenGranted) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  FakeAgent agent(sv[1]);
  agent.Send(EncodeFrame(0, Type::kHello, 0, R"({"proto":1})"));
  auto c = Client::Connect(UniqueFd(sv[0]), std::chrono::seconds(5));
  ASSERT_TRUE(c.ok());
  auto s = (*c)->Open({{"op", "fs.write"}});
  ASSERT_TRUE(s.ok());
  std::atomic<bool> sent{false};
  std::string big(kInitialWindow + 1000, 'a');
  std::thread w([&] {
    ASSERT_TRUE((*s)->Send(kStdin, big).ok());
    sent = true;
  });
  agent.Read();  // host HELLO
  agent.Read();  // OPEN
  size_t got = 0;
  while (got < kInitialWindow) {
    Frame f = agent.Read();
    ASSERT_EQ(f.type, Type::kData);
    got += f.payload.size();
  }
  EXPECT_EQ(got, kInitialWindow);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(sent.load()) << "the writer must wait for credit";
  agent.Send(EncodeCredit((*s)->id(), kStdin, 1000));
  Frame f = agent.Read();
  EXPECT_EQ(f.payload.size(), 1000u);
  w.join();
  EXPECT_TRUE(sent.load());
  close(sv[1]);
}

TEST(Client, AgentDeathFailsPendingStreams) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  auto s = c->Open({{"op", "exec"}});
  ASSERT_TRUE(s.ok());
  close(peer);
  auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, Event::Kind::kClosed);
  EXPECT_FALSE(c->alive());
}

TEST(Client, CloseReasonSaysWhoEndedTheConnection) {
  // The agent hangs up (here with the host's frames unread, so the host's
  // read sees a reset): pending streams and the client say so.
  {
    int peer = -1;
    auto c = HandshakenClient(&peer);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->close_reason(), CloseReason::kOpen);
    EXPECT_EQ(c->failure(), "");
    auto s = c->Open(InfoRequest{});  // a typed request
    ASSERT_TRUE(s.ok());
    close(peer);
    auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, Event::Kind::kClosed);
    EXPECT_EQ(e->close_reason, CloseReason::kAgentHungUp);
    EXPECT_EQ(c->close_reason(), CloseReason::kAgentHungUp);
    EXPECT_NE(c->failure(), "closed by host");
  }
  // The host closes: the reason is the host's, and stays so.
  {
    int peer = -1;
    auto c = HandshakenClient(&peer);
    ASSERT_TRUE(c);
    auto s = c->Open(ShutdownRequest{});
    ASSERT_TRUE(s.ok());
    c->Close();
    auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, Event::Kind::kClosed);
    EXPECT_EQ(e->close_reason, CloseReason::kClosedByHost);
    EXPECT_EQ(c->close_reason(), CloseReason::kClosedByHost);
    EXPECT_EQ(c->failure(), "closed by host");  // the text is kept for messages
    close(peer);
  }
  // The agent sends a corrupt header (reserved bits set).
  {
    int peer = -1;
    auto c = HandshakenClient(&peer);
    ASSERT_TRUE(c);
    std::string bad = EncodeFrame(1, Type::kResult, 0, "{}");
    bad[10] = 1;
    ASSERT_EQ(write(peer, bad.data(), bad.size()), ssize_t(bad.size()));
    for (int i = 0; i < 500 && c->alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(c->close_reason(), CloseReason::kProtocolError);
    close(peer);
  }
  EXPECT_EQ(CloseReasonName(CloseReason::kClosedByHost), "closed by host");
  EXPECT_EQ(CloseReasonName(CloseReason::kIoError), "i/o error");
}

TEST(Client, DeathCallbackMayDropTheLastReference) {
  // A sandbox torn down elsewhere can leave the reader thread's death
  // callback holding the last reference; the client is then destroyed on its
  // own reader thread and must not try to join itself.
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  auto holder = std::make_shared<std::shared_ptr<Client>>(std::move(c));
  std::promise<std::thread::id> destroyed_on;
  auto done = destroyed_on.get_future();
  (*holder)->SetOnDeath([holder, &destroyed_on](const std::string&) mutable {
    std::weak_ptr<Client> weak = *holder;
    holder->reset();  // the last reference to the client
    holder.reset();
    EXPECT_TRUE(weak.expired());
    destroyed_on.set_value(std::this_thread::get_id());
  });
  holder.reset();  // only the callback keeps the client alive now
  close(peer);
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(done.get(), std::this_thread::get_id());
}

}  // namespace
}  // namespace skiff::proto
