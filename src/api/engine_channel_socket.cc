#include "api/engine_channel_socket.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "api/engine_socket.h"
#include "base/text.h"

namespace skiff::api {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Messages a channel writer may send are bounded by the engine's own
// WebSocket limits; 16 MiB covers every SDK's chunking.
constexpr size_t kMaxChannelMessage = size_t{16} << 20;
// A read or close handler that was cut off by Close() runs within this.
constexpr milliseconds kDrain{2000};

bool ValidChannelId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
    if (!ok) return false;
  }
  return true;
}

Error Aborted(const std::string& why) { return Error(Code::kS218, "fs channel aborted: " + why); }

}  // namespace

struct EngineChannelSocket::Impl {
  explicit Impl(EngineLinkOptions o) : link(std::move(o)) {}
  net::io_context ioc;
  EngineLinkOptions link;
  std::unique_ptr<EngineSocket> ws;
  boost::beast::flat_buffer in;
  // Set by handlers (which run only inside this object's Drive calls).
  std::shared_ptr<bool> closed = std::make_shared<bool>(false);  // the engine ended this side

  // Runs handlers until *done or the deadline; false on the deadline (the
  // socket is then closed and the cut-off handler drained).
  bool Drive(const std::shared_ptr<bool>& done, milliseconds deadline) {
    const auto end = Clock::now() + deadline;
    while (!*done) {
      ioc.restart();
      if (ioc.run_one_until(end) == 0 && !*done) {
        if (Clock::now() >= end || ioc.stopped()) {
          Cut();
          return *done;
        }
      }
    }
    return true;
  }
  // Closes the TCP connection and lets every pending handler finish.
  void Cut() {
    if (ws) ws->Close();
    ioc.restart();
    ioc.run_for(kDrain);
    *closed = true;
  }
  // Writer side: a read that ends when the engine closes this side (it
  // never sends a writer anything else).
  void WatchForClose() {
    auto c = closed;
    ws->AsyncRead(in, [c](const std::string&, size_t) { *c = true; });
  }
};

EngineChannelSocket::EngineChannelSocket() = default;
EngineChannelSocket::~EngineChannelSocket() {
  if (impl_) impl_->Cut();
}

Result<std::unique_ptr<EngineChannelSocket>> EngineChannelSocket::Open(const EngineLinkOptions& link,
                                                                       const std::string& channel_id,
                                                                       const std::string& access_key, Dir dir,
                                                                       milliseconds deadline) {
  if (!ValidChannelId(channel_id)) return InvalidRequest("content: not a channel id");
  if (access_key.empty() || access_key.size() > 1024)
    return InvalidRequest("content: not a channel access key");
  std::unique_ptr<EngineChannelSocket> out(new EngineChannelSocket());
  out->impl_ = std::make_unique<Impl>(link);
  Impl& s = *out->impl_;
  const auto end = Clock::now() + deadline;
  auto left = [&] {
    return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(end - Clock::now()));
  };

  // Resolve.
  tcp::resolver resolver(s.ioc);
  auto resolved = std::make_shared<bool>(false);
  auto endpoints = std::make_shared<tcp::resolver::results_type>();
  auto resolve_error = std::make_shared<std::string>();
  resolver.async_resolve(link.parsed.host, link.parsed.port,
                         [resolved, endpoints, resolve_error](const boost::system::error_code& ec,
                                                              const tcp::resolver::results_type& r) {
                           if (ec) *resolve_error = ec.message();
                           *endpoints = r;
                           *resolved = true;
                         });
  if (!s.Drive(resolved, left())) {
    resolver.cancel();
    return Aborted("the engine at " + link.url + " was not resolved in time");
  }
  if (!resolve_error->empty()) return Aborted("resolving the engine at " + link.url + ": " + *resolve_error);

  // Connect and upgrade on /ws/channels/{id} under the engine URL's path.
  std::string base = link.parsed.path;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string target = base + "/ws/channels/" + channel_id + "?key=" + PercentEncode(access_key) +
                             "&dir=" + (dir == Dir::kRead ? "read" : "write");
  s.ws = std::make_unique<EngineSocket>(s.ioc, s.link, kMaxChannelMessage);
  auto opened = std::make_shared<bool>(false);
  auto open_error = std::make_shared<std::string>();
  s.ws->AsyncOpen(
      *endpoints,
      [opened, open_error](const std::string& e) {
        *open_error = e;
        *opened = true;
      },
      target);
  if (!s.Drive(opened, left())) return Aborted("the engine's channel endpoint did not answer in time");
  if (!open_error->empty()) {
    if (s.ws->upgrade_status() == 404) return InvalidRequest("content: unknown channel or wrong access key");
    return Aborted("opening the channel on the engine: " + *open_error);
  }
  if (dir == Dir::kWrite) s.WatchForClose();
  return out;
}

Status EngineChannelSocket::Write(const std::string& bytes, milliseconds deadline, bool binary) {
  Impl& s = *impl_;
  s.ioc.restart();
  s.ioc.poll();
  if (*s.closed) return Aborted("the engine closed the channel (its reader went away)");
  auto done = std::make_shared<bool>(false);
  auto error = std::make_shared<std::string>();
  s.ws->AsyncWrite(
      bytes,
      [done, error](const std::string& e, size_t) {
        *error = e;
        *done = true;
      },
      binary);
  if (!s.Drive(done, deadline))
    return Aborted("nobody read the channel for " + std::to_string(deadline.count() / 1000) + " s");
  if (!error->empty()) return Aborted("writing to the engine's channel: " + *error);
  return OkStatus();
}

bool EngineChannelSocket::Alive() {
  Impl& s = *impl_;
  s.ioc.restart();
  s.ioc.poll();
  return !*s.closed;
}

void EngineChannelSocket::Finish(milliseconds deadline) {
  Impl& s = *impl_;
  s.ioc.restart();
  s.ioc.poll();
  if (*s.closed) return;
  // The close frame tells the engine the stream ended; the engine answers by
  // dropping its side, which ends the watching read.
  auto done = std::make_shared<bool>(false);
  s.ws->AsyncClose([done](const std::string&) { *done = true; });
  (void)s.Drive(done, deadline);
  (void)s.Drive(s.closed, deadline);
}

Result<std::optional<EngineChannelSocket::Message>> EngineChannelSocket::Read(milliseconds stall) {
  Impl& s = *impl_;
  if (*s.closed) return std::optional<Message>();
  auto done = std::make_shared<bool>(false);
  auto error = std::make_shared<std::string>();
  s.ws->AsyncRead(s.in, [done, error](const std::string& e, size_t) {
    *error = e;
    *done = true;
  });
  if (!s.Drive(done, stall))
    return Aborted("no bytes on the channel for " + std::to_string(stall.count() / 1000) + " s");
  if (*error == "closed") {
    *s.closed = true;
    return std::optional<Message>();
  }
  if (!error->empty()) {
    *s.closed = true;
    return Aborted("the engine's channel broke off: " + *error);
  }
  Message m;
  m.binary = s.ws->got_binary();
  m.data = boost::beast::buffers_to_string(s.in.data());
  s.in.consume(s.in.size());
  return std::optional<Message>(std::move(m));
}

}  // namespace skiff::api
