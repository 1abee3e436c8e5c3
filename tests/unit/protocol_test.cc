#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
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
    size_t want = std::min(wire.size() - off, slice);
    std::span<char> room = d.Room(want + 100);  // room may exceed what is committed
    size_t n = std::min(want, room.size());     // or end where a direct payload ends
    std::memcpy(room.data(), wire.data() + off, n);
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

// An agent that stops reading its channel cannot hold the writing thread:
// past the write stall the connection fails and every stream ends.
TEST(Client, AnAgentThatStopsReadingFailsTheConnection) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  c->SetWriteStall(std::chrono::milliseconds(300));
  auto s = c->Open({{"op", "fs.write"}});
  ASSERT_TRUE(s.ok());
  std::string big(kInitialWindow, 'a');  // within the credit, beyond the socket's buffer
  auto t0 = std::chrono::steady_clock::now();
  Status st = (*s)->Send(kStdin, big);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kS300);
  EXPECT_NE(st.error().message().find("read nothing"), std::string::npos) << st.error().message();
  EXPECT_LT(secs, 5.0);
  EXPECT_FALSE(c->alive());
  EXPECT_EQ(c->close_reason(), CloseReason::kIoError);
  auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, Event::Kind::kClosed);
  close(peer);
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

// Writes `bytes` until done or the host ends the connection; returns how many
// were written.
size_t SendUntilRefused(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  return off;
}

// How much more resident memory the same work costs in this build: a
// sanitizer keeps shadow memory beside every byte the program touches.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr size_t kRssFactor = 4;
#else
constexpr size_t kRssFactor = 1;
#endif

// The process's resident set, from /proc/self/status.
size_t RssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6)) * 1024;
  return 0;
}

bool WaitDead(Client& c) {
  for (int i = 0; i < 1000 && c.alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !c.alive();
}

// An agent that ignores the credit window and floods DATA on a stream nobody
// reads: the host closes the connection as a protocol error once the agent
// passes the window, queues no more than the window, and its memory stays
// flat; the stream ends with kClosed after the DATA it was entitled to.
TEST(ClientWindow, DataBeyondTheWindowClosesTheConnection) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  auto s = c->Open({{"op", "exec"}});
  ASSERT_TRUE(s.ok());
  uint32_t id = (*s)->id();
  // The death callback is what tears a sandbox down: it runs, once, with
  // the violation.
  std::promise<std::string> died;
  c->SetOnDeath([&died](const std::string& why) { died.set_value(why); });
  size_t rss_before = RssBytes();
  std::string chunk = EncodeFrame(id, Type::kData, kStdout, std::string(kChunk, 'x'));
  std::string flood;
  for (int i = 0; i < 64; ++i) flood += chunk;  // 4 MiB a round
  std::atomic<size_t> sent{0};
  std::thread agent([&] {
    for (int round = 0; round < 64; ++round) {  // up to 256 MiB
      size_t n = SendUntilRefused(peer, flood);
      sent += n;
      if (n < flood.size()) return;
    }
  });
  ASSERT_TRUE(WaitDead(*c)) << "the host must close an agent that exceeds its window";
  agent.join();
  EXPECT_EQ(c->close_reason(), CloseReason::kProtocolError);
  EXPECT_NE(c->failure().find("exceeded the credit window"), std::string::npos) << c->failure();
  auto why = died.get_future();
  ASSERT_EQ(why.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(why.get(), c->failure());
  EXPECT_LE(c->queued_bytes(), size_t{kInitialWindow});
  EXPECT_LT(sent.load(), size_t{64} << 20) << "the host stopped reading long before the flood ended";
  EXPECT_LT(RssBytes(), rss_before + kRssFactor * (size_t{32} << 20));
  size_t data = 0;
  for (;;) {
    auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    if (e->kind == Event::Kind::kData) {
      data += e->data.size();
      continue;
    }
    EXPECT_EQ(e->kind, Event::Kind::kClosed);
    EXPECT_EQ(e->close_reason, CloseReason::kProtocolError);
    break;
  }
  EXPECT_EQ(data, size_t{kInitialWindow});
  EXPECT_EQ(c->queued_bytes(), 0u);
  // Calls on the closed connection fail; nothing else is affected.
  EXPECT_FALSE(c->Open({{"op", "info"}}).ok());
  close(peer);
}

// A well-behaved agent sends exactly the window on stdout and stderr before
// any credit comes back, then more as the host returns it: everything
// arrives and the connection stays open.
TEST(ClientWindow, AnAgentAtExactlyTheWindowIsServed) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  auto s = c->Open({{"op", "exec"}});
  ASSERT_TRUE(s.ok());
  uint32_t id = (*s)->id();
  FakeAgent agent(peer);
  constexpr size_t kRounds = 3;
  std::thread t([&] {
    EXPECT_EQ(agent.Read().type, Type::kHello);
    EXPECT_EQ(agent.Read().type, Type::kOpen);
    uint64_t credit[kChannels] = {0, kInitialWindow, kInitialWindow};
    for (size_t round = 0; round < kRounds; ++round) {
      for (uint8_t ch : {kStdout, kStderr}) {
        // Spend all the credit held, in uneven frames.
        while (credit[ch] > 0) {
          size_t n = std::min<uint64_t>(credit[ch], kChunk - 1);
          agent.Send(EncodeFrame(id, Type::kData, ch, std::string(n, 'a')));
          credit[ch] -= n;
        }
      }
      if (round + 1 == kRounds) break;
      // Wait for the whole window back on both channels.
      while (credit[kStdout] < kInitialWindow || credit[kStderr] < kInitialWindow) {
        Frame f = agent.Read();
        ASSERT_EQ(f.type, Type::kCredit);
        credit[f.flags] += *DecodeCredit(f.payload);
      }
    }
    agent.Send(EncodeFrame(id, Type::kEnd, kStdout, ""));
    agent.Send(EncodeFrame(id, Type::kEnd, kStderr, ""));
    agent.Send(EncodeFrame(id, Type::kResult, 0, R"({"exit_code":0})"));
  });
  size_t got[kChannels] = {0, 0, 0};
  for (;;) {
    auto e = (*s)->Next(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    ASSERT_TRUE(e.has_value());
    if (e->kind == Event::Kind::kData) got[e->channel] += e->data.size();
    if (e->kind == Event::Kind::kResult || e->kind == Event::Kind::kError ||
        e->kind == Event::Kind::kClosed) {
      EXPECT_EQ(e->kind, Event::Kind::kResult) << e->json.dump();
      break;
    }
  }
  t.join();
  EXPECT_EQ(got[kStdout], kRounds * kInitialWindow);
  EXPECT_EQ(got[kStderr], kRounds * kInitialWindow);
  EXPECT_TRUE(c->alive()) << c->failure();
  EXPECT_EQ(c->queued_bytes(), 0u);
  close(peer);
}

// What an agent can queue without credit is bounded too: repeated META, a
// frame on a stream the host never opened, DATA on a channel the agent does
// not write, DATA after END each close the connection.
TEST(ClientWindow, ControlFloodsAndStrayFramesAreViolations) {
  struct Case {
    const char* name;
    std::function<std::string(uint32_t id)> frames;
    const char* message;
  };
  std::vector<Case> cases = {
      {"repeated META",
       [](uint32_t id) {
         std::string w;
         for (int i = 0; i < 10000; ++i) w += EncodeFrame(id, Type::kMeta, 0, R"({"pid":1})");
         return w;
       },
       "META/END frames waiting"},
      {"never-opened stream", [](uint32_t id) { return EncodeFrame(id + 2, Type::kMeta, 0, "{}"); },
       "never opened"},
      {"even stream", [](uint32_t) { return EncodeFrame(4, Type::kResult, 0, "{}"); }, "never opened"},
      {"stdin channel", [](uint32_t id) { return EncodeFrame(id, Type::kData, kStdin, "x"); },
       "which the agent does not write"},
      {"channel 200", [](uint32_t id) { return EncodeFrame(id, Type::kData, 200, "x"); },
       "which the agent does not write"},
      {"DATA after END",
       [](uint32_t id) {
         return EncodeFrame(id, Type::kEnd, kStdout, "") + EncodeFrame(id, Type::kData, kStdout, "x");
       },
       "after END"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    int peer = -1;
    auto c = HandshakenClient(&peer);
    ASSERT_TRUE(c);
    auto s = c->Open({{"op", "exec"}});
    ASSERT_TRUE(s.ok());
    SendUntilRefused(peer, k.frames((*s)->id()));
    ASSERT_TRUE(WaitDead(*c));
    EXPECT_EQ(c->close_reason(), CloseReason::kProtocolError);
    EXPECT_NE(c->failure().find(k.message), std::string::npos) << c->failure();
    EXPECT_LE(c->queued_bytes(), size_t{kMaxQueuedControl} * 64);
    close(peer);
  }
}

// A stream the host abandoned: the agent may still send what is left of the
// window, which the host credits straight back; more than that is a
// violation.
TEST(ClientWindow, AnAbandonedStreamKeepsItsWindow) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  FakeAgent agent(peer);
  constexpr size_t kUsed = 600 * 1024, kLeft = kInitialWindow - kUsed;
  uint32_t id;
  {
    auto s = c->Open({{"op", "exec"}});
    ASSERT_TRUE(s.ok());
    id = (*s)->id();
    agent.Send(EncodeFrame(id, Type::kData, kStdout, std::string(kUsed, 'a')));  // never consumed
    for (int i = 0; i < 500 && c->queued_bytes() < kUsed; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(c->queued_bytes(), kUsed);
  }  // destroyed unfinished: CANCEL, and its queued bytes are released
  EXPECT_EQ(c->queued_bytes(), 0u);
  EXPECT_EQ(agent.Read().type, Type::kHello);
  EXPECT_EQ(agent.Read().type, Type::kOpen);
  EXPECT_EQ(agent.Read().type, Type::kCancel);
  for (int round = 0; round < 2; ++round) {
    agent.Send(EncodeFrame(id, Type::kData, kStdout, std::string(kLeft, 'b')));
    Frame credit = agent.Read();
    ASSERT_EQ(credit.type, Type::kCredit);
    EXPECT_EQ(DecodeCredit(credit.payload), kLeft);
  }
  EXPECT_TRUE(c->alive());
  SendUntilRefused(peer, EncodeFrame(id, Type::kData, kStdout, std::string(kLeft + 1, 'c')));
  ASSERT_TRUE(WaitDead(*c));
  EXPECT_EQ(c->close_reason(), CloseReason::kProtocolError);
  EXPECT_NE(c->failure().find("exceeded the credit window"), std::string::npos) << c->failure();
  close(peer);
}

// Many streams a well-behaved agent fills to their windows while nobody
// reads: the reader pauses at kMaxQueuedBytes instead of growing, and
// everything arrives once the callers consume.
TEST(ClientWindow, QueuedBytesPerClientAreBounded) {
  int peer = -1;
  auto c = HandshakenClient(&peer);
  ASSERT_TRUE(c);
  constexpr size_t kStreams = (kMaxQueuedBytes / (2 * kInitialWindow)) + 8;
  std::vector<std::shared_ptr<Stream>> streams;
  for (size_t i = 0; i < kStreams; ++i) {
    auto s = c->Open({{"op", "exec"}});
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  std::thread agent([&] {
    std::string body(kChunk, 'z');
    for (auto& s : streams)
      for (uint8_t ch : {kStdout, kStderr}) {
        std::string w;
        for (uint32_t n = 0; n < kInitialWindow; n += kChunk)
          w += EncodeFrame(s->id(), Type::kData, ch, body);
        w += EncodeFrame(s->id(), Type::kEnd, ch, "");
        if (ch == kStderr) w += EncodeFrame(s->id(), Type::kResult, 0, "{}");
        SendUntilRefused(peer, w);
      }
  });
  // A real agent reads what the host sends (credits) while it writes; one
  // that does not is failed after the write stall (its own test).
  std::atomic<bool> done{false};
  std::thread drain([&] {
    char buf[65536];
    while (!done) {
      pollfd p{peer, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && ::recv(peer, buf, sizeof buf, 0) <= 0) break;
    }
  });
  // Up to 60 s: an instrumented (sanitizer) build fills it far slower.
  for (int i = 0; i < 6000 && c->queued_bytes() < kMaxQueuedBytes; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the reader has paused, not grown
  size_t queued = c->queued_bytes();
  EXPECT_GE(queued, kMaxQueuedBytes);
  EXPECT_LE(queued, kMaxQueuedBytes + 2 * kMaxPayload);
  EXPECT_TRUE(c->alive()) << c->failure();
  for (auto& s : streams) {
    size_t got = 0;
    for (;;) {
      auto e = s->Next(std::chrono::steady_clock::now() + std::chrono::seconds(20));
      ASSERT_TRUE(e.has_value());
      if (e->kind == Event::Kind::kData) got += e->data.size();
      if (e->kind == Event::Kind::kResult) break;
      ASSERT_NE(e->kind, Event::Kind::kClosed) << e->json.dump();
    }
    EXPECT_EQ(got, 2 * size_t{kInitialWindow});
  }
  agent.join();
  done = true;
  drain.join();
  EXPECT_TRUE(c->alive()) << c->failure();
  close(peer);
}

}  // namespace
}  // namespace skiff::proto
