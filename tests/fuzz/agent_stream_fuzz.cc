// Fuzzes the host side of the agent protocol (proto::Client) with the bytes a
// hostile agent sends. On a socketpair the agent says a valid HELLO; the host
// opens an exec stream and an fs.read stream (the first byte of the input
// decides whether the fs.read is abandoned before the agent speaks, and
// whether the host writes stdin), then makes a Call with a short deadline;
// the rest of the input is what the agent sends, then it hangs up. The host
// must never crash, leak, hang or queue more than it was sent: every stream
// ends with a final event, nothing stays queued, the Call returns.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "protocol/client.h"
#include "protocol/frame.h"

namespace {

using namespace skiff::proto;
using Clock = std::chrono::steady_clock;

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "agent_stream_fuzz: %s\n", what);
    abort();
  }
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the host closed the channel (a protocol violation)
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads the host's frames on the agent's end until an OPEN of `stream`.
void ReadUntilOpen(int fd, Decoder& dec, uint32_t stream) {
  char buf[4096];
  for (;;) {
    for (;;) {
      auto f = dec.Next();
      Check(f.ok(), "the host sent a corrupt frame");
      if (!*f) break;
      if ((*f)->type == Type::kOpen && (*f)->stream == stream) return;
    }
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    Check(n > 0, "the host's channel ended before its OPEN");
    dec.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

// Reads `s` to its final event; the connection is gone by now, so it must
// come without waiting.
void Drain(Stream& s) {
  for (;;) {
    auto e = s.Next(Clock::now() + std::chrono::seconds(10));
    Check(e.has_value(), "a stream of a closed connection never ended");
    if (e->kind == Event::Kind::kResult || e->kind == Event::Kind::kError ||
        e->kind == Event::Kind::kClosed) {
      auto again = s.Next(Clock::now());
      Check(again.has_value() && again->kind == e->kind, "a finished stream changed its final event");
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string_view agent_bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  int sv[2];
  Check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
  skiff::UniqueFd agent(sv[1]);
  SendAll(agent.get(), EncodeFrame(0, Type::kHello, 0, R"({"proto":1,"agent":"fuzz"})"));
  auto connected = Client::Connect(skiff::UniqueFd(sv[0]), std::chrono::seconds(5));
  Check(connected.ok(), "handshake with a valid HELLO failed");
  std::shared_ptr<Client> c = *connected;

  auto exec = c->Open({{"op", "exec"}, {"argv", {"true"}}});  // stream 1
  auto read = c->Open({{"op", "fs.read"}, {"path", "/f"}});   // stream 3
  Check(exec.ok() && read.ok(), "open");
  std::shared_ptr<Stream> s1 = std::move(exec).value(), s3 = std::move(read).value();
  if (mode & 1) s3.reset();  // abandoned: CANCEL, its DATA is credited back
  if (mode & 2) Check(s1->Send(kStdin, "input", Clock::now() + std::chrono::seconds(1)).ok(), "send");

  // The Call's stream (5) exists once its OPEN is on the wire.
  skiff::Result<nlohmann::json> call = skiff::Error(skiff::Code::kS300, "not called");
  std::thread caller([&] {
    call = c->Call({{"op", "info"}}, Clock::now() + std::chrono::milliseconds(500));
  });
  Decoder host_frames;
  ReadUntilOpen(agent.get(), host_frames, 5);

  SendAll(agent.get(), agent_bytes);
  ::shutdown(agent.get(), SHUT_WR);  // the agent hangs up: the host sees EOF
  caller.join();

  Drain(*s1);
  if (s3) Drain(*s3);
  for (int i = 0; i < 1000 && c->alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Check(!c->alive(), "the connection outlived the agent's hang-up");
  Check(c->queued_bytes() <= agent_bytes.size(), "the host queued more than the agent sent");
  s1.reset();
  s3.reset();
  Check(c->queued_bytes() == 0, "bytes stayed queued after every stream was dropped");
  c.reset();  // joins the reader
  return 0;
}
