#include "protocol/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <system_error>

#include "base/json_limits.h"
#include "base/log.h"
#include "base/thread.h"
#include "protocol/hello.h"
#include "protocol/messages.h"

namespace skiff::proto {
namespace {

using Clock = std::chrono::steady_clock;

// Writes every byte of iov[0..count) (sendmsg gathers them; partial
// writes continue where they stopped; a full socket is waited out, but for
// no longer than `stall` without progress: an agent that stops reading its
// channel cannot hold a host thread).
Status WriteAllV(int fd, iovec* iov, int count, std::chrono::milliseconds stall) {
  int first = 0;
  std::optional<Clock::time_point> stuck_since;
  while (first < count) {
    msghdr m{};
    m.msg_iov = iov + first;
    m.msg_iovlen = static_cast<size_t>(count - first);
    ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == ENOTSOCK) w = ::writev(fd, iov + first, count - first);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        auto now = Clock::now();
        if (!stuck_since) stuck_since = now;
        if (now - *stuck_since >= stall)
          return Error(Code::kS300,
                       "agent channel: the agent read nothing for " + std::to_string(stall.count()) + " ms");
        pollfd pf{fd, POLLOUT, 0};
        ::poll(&pf, 1, 100);
        continue;
      }
      return Error::Sys(Code::kS300, "write", "agent channel", errno);
    }
    stuck_since.reset();
    auto left = static_cast<size_t>(w);
    while (first < count && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return OkStatus();
}

Status WriteAll(int fd, const char* p, size_t n, std::chrono::milliseconds stall) {
  iovec iov{const_cast<char*>(p), n};
  return WriteAllV(fd, &iov, 1, stall);
}

bool IsFinal(Event::Kind k) {
  return k == Event::Kind::kResult || k == Event::Kind::kError || k == Event::Kind::kClosed;
}

}  // namespace

std::string_view CloseReasonName(CloseReason r) {
  switch (r) {
    case CloseReason::kOpen:
      return "open";
    case CloseReason::kClosedByHost:
      return "closed by host";
    case CloseReason::kAgentHungUp:
      return "agent hung up";
    case CloseReason::kProtocolError:
      return "protocol error";
    case CloseReason::kIoError:
      return "i/o error";
  }
  return "unknown";
}

// ---------------------------------------------------------------- Stream

Stream::~Stream() {
  // Nothing may escape a destructor. Should the CANCEL fail to be built or
  // sent (out of memory), the agent finishes the operation on its own; the
  // stream is forgotten either way, so the client never delivers to it.
  try {
    bool need_cancel;
    {
      std::lock_guard<std::mutex> lk(client_->mu_);
      need_cancel = !done_ && !client_->dead_;
    }
    if (need_cancel) (void)client_->WriteRaw(EncodeFrame(id_, Type::kCancel, 0, {}));
  } catch (...) {
  }
  try {
    client_->ForgetStream(id_);
  } catch (...) {
    std::terminate();  // a stream the client still holds would dangle
  }
}

Status Stream::Deliver(Event e) {
  auto where = [&] { return " on stream " + std::to_string(id_); };
  if (e.kind == Event::Kind::kData || e.kind == Event::Kind::kEnd) {
    const char* what = e.kind == Event::Kind::kData ? "DATA" : "END";
    if (e.channel != kStdout && e.channel != kStderr)
      return Error(Code::kS300, std::string("protocol: ") + what + " on channel " +
                                    std::to_string(e.channel) + where() + ", which the agent does not write");
    if (ended_[e.channel])
      return Error(Code::kS300, std::string("protocol: ") + what + " after END on channel " +
                                    std::to_string(e.channel) + where());
  }
  if (e.kind == Event::Kind::kData) {
    uint64_t& window = recv_window_[e.channel];
    if (e.data.size() > window)
      return Error(Code::kS300,
                   "protocol: the agent exceeded the credit window: " + std::to_string(e.data.size()) +
                       " bytes of DATA on channel " + std::to_string(e.channel) + where() + " with " +
                       std::to_string(window) + " granted");
    window -= e.data.size();
  }
  if (e.kind == Event::Kind::kEnd) ended_[e.channel] = true;
  if (done_ || consumed_final_) return OkStatus();  // finished: nothing more is queued
  bool control = e.kind == Event::Kind::kMeta || e.kind == Event::Kind::kEnd;
  if (control) {
    if (queued_control_ >= kMaxQueuedControl)
      return Error(Code::kS300, "protocol: more than " + std::to_string(kMaxQueuedControl) +
                                    " META/END frames waiting" + where());
    ++queued_control_;
  }
  if (IsFinal(e.kind)) done_ = true;
  client_->queued_bytes_ += e.data.size();
  events_.push_back(std::move(e));
  return OkStatus();
}

void Stream::DeliverClosed(Event e) {
  if (done_) return;
  done_ = true;
  events_.push_back(std::move(e));
}

bool Stream::finished() const {
  std::lock_guard<std::mutex> lk(client_->mu_);
  return done_;
}

std::optional<Event> Stream::Next(std::optional<Clock::time_point> deadline) {
  std::unique_lock<std::mutex> lk(client_->mu_);
  if (consumed_final_) return final_;
  auto ready = [&] { return !events_.empty(); };
  if (deadline) {
    if (!client_->cv_.wait_until(lk, *deadline, ready)) return std::nullopt;
  } else {
    client_->cv_.wait(lk, ready);
  }
  Event e = std::move(events_.front());
  events_.pop_front();
  client_->queued_bytes_ -= e.data.size();
  if (client_->reader_paused_ && client_->queued_bytes_ < kMaxQueuedBytes) client_->cv_.notify_all();
  if (e.kind == Event::Kind::kMeta || e.kind == Event::Kind::kEnd) --queued_control_;
  bool grant = e.kind == Event::Kind::kData && !e.data.empty() && !client_->dead_ && !done_;
  uint8_t ch = e.channel;
  auto n = static_cast<uint32_t>(e.data.size());
  // The credit is counted as granted before the agent can see it.
  if (grant) recv_window_[ch] += n;
  if (e.kind == Event::Kind::kMeta || e.kind == Event::Kind::kResult || e.kind == Event::Kind::kError) {
    // Control payloads wait raw and are parsed here, on the caller's thread.
    e.json = ParseJsonBounded(e.data);
    e.data.clear();
    if (e.json.is_discarded()) {
      e.kind = Event::Kind::kError;
      e.json = {{"code", "S300"}, {"message", "platform failure: sandbox: agent sent malformed JSON"}};
    }
  }
  if (IsFinal(e.kind)) {
    consumed_final_ = true;
    final_ = e;
  }
  lk.unlock();
  // Return the credit only now that the caller has consumed the bytes.
  if (grant) (void)client_->WriteRaw(EncodeCredit(id_, ch, n));
  return e;
}

Status Stream::Send(uint8_t channel, std::string_view bytes, std::optional<Clock::time_point> deadline) {
  if (channel >= kChannels) return Error(Code::kS300, "protocol: bad channel");
  while (!bytes.empty()) {
    size_t n;
    {
      std::unique_lock<std::mutex> lk(client_->mu_);
      auto ready = [&] { return client_->dead_ || done_ || send_credit_[channel] > 0; };
      if (deadline) {
        if (!client_->cv_.wait_until(lk, *deadline, ready))
          return Error(Code::kS218, "fs channel aborted: agent granted no credit before the deadline");
      } else {
        client_->cv_.wait(lk, ready);
      }
      if (client_->dead_) return Platform("sandbox", "agent channel closed: " + client_->failure_);
      if (done_) return Error(Code::kS300, "protocol: stream already finished");
      n = std::min<uint64_t>({bytes.size(), kChunk, send_credit_[channel]});
      send_credit_[channel] -= n;
    }
    SKIFF_RETURN_IF_ERROR(client_->WriteFrame(id_, Type::kData, channel, bytes.substr(0, n)));
    bytes.remove_prefix(n);
  }
  return OkStatus();
}

Status Stream::End(uint8_t channel) { return client_->WriteRaw(EncodeFrame(id_, Type::kEnd, channel, {})); }

void Stream::Cancel() { (void)client_->WriteRaw(EncodeFrame(id_, Type::kCancel, 0, {})); }

// ---------------------------------------------------------------- Client

namespace {

// The agent's HELLO, read synchronously before a reader starts.
Result<nlohmann::json> ReadHello(int fd, std::chrono::milliseconds timeout) {
  Decoder dec;
  auto deadline = Clock::now() + timeout;
  std::optional<Frame> hello;
  char buf[4096];
  while (!hello) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return Platform("boot", "agent did not say hello within " + std::to_string(timeout.count()) + " ms");
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error::Sys(Code::kS300, "poll", "agent channel", errno);
    if (r == 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", "agent channel", errno);
    if (n == 0) return Platform("boot", "agent closed its channel before the handshake");
    dec.Feed(std::string_view(buf, static_cast<size_t>(n)));
    auto f = dec.Next();
    if (!f.ok()) return std::move(f).error();
    if (*f) hello = std::move(**f);
  }
  if (hello->type != Type::kHello || hello->stream != 0)
    return Platform("boot", "agent's first frame was " + std::string(TypeName(hello->type)) + ", not HELLO");
  nlohmann::json h = ParseJsonBounded(hello->payload);
  SKIFF_ASSIGN_OR_RETURN(AgentHello agent, AgentHello::FromJson(h));
  if (agent.proto != kVersion)
    return Platform("boot", "agent speaks protocol " + std::to_string(agent.proto) + ", host speaks " +
                                std::to_string(kVersion));
  if (dec.buffered() != 0) return Platform("boot", "agent sent frames before the handshake finished");
  return h;
}

}  // namespace

Result<std::shared_ptr<Client>> Client::Connect(UniqueFd fd, std::chrono::milliseconds timeout) {
  SKIFF_ASSIGN_OR_RETURN(nlohmann::json h, ReadHello(fd.get(), timeout));
  std::shared_ptr<Client> c(new Client(std::move(fd)));
  c->hello_ = std::move(h);
  if (::pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) < 0) return Error::Sys(Code::kS300, "pipe2", "wake", errno);
  SKIFF_RETURN_IF_ERROR(c->WriteRaw(EncodeHostHello()));
  // Guarded: an exception in the reader (or the death callback it runs)
  // ends this connection, not the daemon.
  c->reader_ = std::thread([raw = c.get()] { RunGuarded("agent reader", [raw] { raw->ReaderLoop(); }); });
  return c;
}

Client::~Client() {
  // Nothing escapes a destructor: a failure to mark the streams closed is
  // logged, and the channel is shut down regardless so the reader ends.
  try {
    MarkClosed();
  } catch (const std::exception& e) {
    SKIFF_LOG(Error) << "agent channel: closing: " << e.what();
  }
  HangUp();
  // The death callback may drop the last reference to this client (a torn
  // down sandbox), so the destructor can run on the reader thread itself.
  // That thread touches no member after the callback returns; joining it
  // from itself would throw (EDEADLK) and terminate the process.
  if (reader_.joinable()) {
    // join and detach throw only for a thread that is not joinable (or, for
    // join, is this one), which the checks here exclude.
    try {
      if (reader_.get_id() == std::this_thread::get_id())
        reader_.detach();
      else
        reader_.join();
    } catch (const std::system_error& e) {
      SKIFF_LOG(Error) << "agent channel: reader thread: " << e.what();
    }
  }
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

void Client::Close() {
  MarkClosed();
  HangUp();
}

void Client::MarkClosed() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!dead_) Fail(CloseReason::kClosedByHost, "closed by host");
}

void Client::HangUp() noexcept {
  // Tell the agent at once: on EOF it kills every process and exits, so a
  // stop does not have to wait out the SIGTERM grace of a PID 1.
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
}

bool Client::alive() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !dead_;
}

std::string Client::failure() const {
  std::lock_guard<std::mutex> lk(mu_);
  return failure_;
}

CloseReason Client::close_reason() const {
  std::lock_guard<std::mutex> lk(mu_);
  return close_reason_;
}

void Client::SetOnDeath(std::function<void(const std::string&)> cb) {
  std::lock_guard<std::mutex> lk(mu_);
  on_death_ = std::move(cb);
}

void Client::Fail(CloseReason reason, const std::string& why) {
  if (dead_) return;
  dead_ = true;
  failure_ = why;
  close_reason_ = reason;
  for (auto& [id, s] : streams_) {
    Event e;
    e.kind = Event::Kind::kClosed;
    e.json = {{"message", why}};
    e.close_reason = reason;
    s->DeliverClosed(std::move(e));
  }
  cv_.notify_all();
}

Status Client::WriteRaw(const std::string& bytes) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) return Platform("sandbox", "agent channel closed: " + failure_);
  }
  Status st = OkStatus();
  {
    std::lock_guard<std::mutex> lk(write_mu_);
    st = WriteLocked(bytes.data(), bytes.size());
  }
  if (!st.ok()) FailWrite(st.error());
  return st;
}

Status Client::WriteLocked(const char* p, size_t n) {
  if (holding_) {
    held_.append(p, n);
    return OkStatus();
  }
  return WriteAll(fd_.get(), p, n, write_stall_);
}

Status Client::ReleaseHeld() {
  Status st = OkStatus();
  {
    std::lock_guard<std::mutex> lk(write_mu_);
    holding_ = false;
    std::string held = std::move(held_);
    held_.clear();
    if (!held.empty()) st = WriteAll(fd_.get(), held.data(), held.size(), write_stall_);
  }
  if (!st.ok()) FailWrite(st.error());
  return st;
}

Result<std::shared_ptr<Stream>> Client::Quiesce(Stream::Clock::time_point deadline) {
  std::string payload = QuiesceRequest{}.ToJson().dump();
  uint32_t id;
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) return Platform("sandbox", "agent channel closed: " + failure_);
    id = next_id_;
    next_id_ += 2;
    s.reset(new Stream(shared_from_this(), id));
    streams_[id] = s.get();
  }
  std::string open = EncodeFrame(id, Type::kOpen, 0, payload);
  Status st = OkStatus();
  {
    // The OPEN is the last frame written; everything after it is held.
    std::lock_guard<std::mutex> lk(write_mu_);
    if (holding_) return Platform("sandbox", "the agent channel is already quiesced");
    st = WriteAll(fd_.get(), open.data(), open.size(), write_stall_);
    holding_ = st.ok();
  }
  if (!st.ok()) {
    FailWrite(st.error());
    return std::move(st).error();
  }
  for (;;) {
    std::optional<Event> e = s->Next(deadline);
    if (e && e->kind == Event::Kind::kMeta) return s;
    if (e && e->kind == Event::Kind::kData) continue;
    Status released = ReleaseHeld();
    (void)released;  // a dead channel reports itself below
    if (!e) return Platform("sandbox", "agent did not quiesce in time");
    if (e->kind == Event::Kind::kError) {
      auto code = CodeFromName(e->json.value("code", std::string("S300")));
      return Error(code.value_or(Code::kS300), "quiesce: " + e->json.value("message", std::string()));
    }
    return Platform("sandbox", "agent channel closed while quiescing");
  }
}

Status Client::Release(const std::shared_ptr<Stream>& quiesce, Stream::Clock::time_point deadline) {
  SKIFF_RETURN_IF_ERROR(ReleaseHeld());
  SKIFF_RETURN_IF_ERROR(quiesce->End(kStdin));
  for (;;) {
    std::optional<Event> e = quiesce->Next(deadline);
    if (!e) return Platform("sandbox", "agent did not end its quiesce in time");
    if (e->kind == Event::Kind::kResult) return OkStatus();
    if (e->kind == Event::Kind::kError || e->kind == Event::Kind::kClosed)
      return Platform("sandbox", "quiesce: " + e->json.value("message", std::string("channel closed")));
  }
}

void Client::FailWrite(const Error& e) {
  // A frame may be half written: the channel cannot be used again.
  {
    std::lock_guard<std::mutex> lk(mu_);
    Fail(CloseReason::kIoError, e.message());
  }
  HangUp();
}

void Client::SetWriteStall(std::chrono::milliseconds stall) {
  std::lock_guard<std::mutex> lk(write_mu_);
  write_stall_ = stall;
}

Status Client::WriteFrame(uint32_t stream, Type type, uint8_t flags, std::string_view payload) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) return Platform("sandbox", "agent channel closed: " + failure_);
  }
  char header[kHeaderSize];
  EncodeHeader(header, static_cast<uint32_t>(payload.size()), stream, type, flags);
  iovec iov[2] = {{header, kHeaderSize}, {const_cast<char*>(payload.data()), payload.size()}};
  Status st = OkStatus();
  {
    std::lock_guard<std::mutex> lk(write_mu_);
    if (holding_) {
      held_.append(header, kHeaderSize);
      held_.append(payload);
    } else {
      st = WriteAllV(fd_.get(), iov, 2, write_stall_);
    }
  }
  if (!st.ok()) FailWrite(st.error());
  return st;
}

void Client::ForgetStream(uint32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  for (const Event& e : s.events_) queued_bytes_ -= e.data.size();
  s.events_.clear();
  if (reader_paused_ && queued_bytes_ < kMaxQueuedBytes) cv_.notify_all();
  if (!s.done_ && !dead_) {
    // The agent may still send what it had credit for (until it sees the
    // CANCEL); remember the window so that DATA is checked and credited back.
    Abandoned a{};
    for (uint8_t ch = 0; ch < kChannels; ++ch) a.window[ch] = s.ended_[ch] ? 0 : s.recv_window_[ch];
    abandoned_[id] = a;
    if (abandoned_.size() > kMaxAbandonedStreams) abandoned_.erase(abandoned_.begin());
  }
  streams_.erase(it);
}

size_t Client::queued_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queued_bytes_;
}

void Client::GrantFromReader(uint32_t stream, uint8_t channel, uint32_t bytes) {
  std::string credit = EncodeCredit(stream, channel, bytes);
  Status st = OkStatus();
  {
    std::lock_guard<std::mutex> wl(write_mu_);
    st = WriteLocked(credit.data(), credit.size());
  }
  if (!st.ok()) FailWrite(st.error());
}

Status Client::OnFrame(Frame f) {
  if (f.type == Type::kHello || !IsKnownType(f.type) || f.type == Type::kOpen || f.type == Type::kCancel) {
    // Not for the host: ignored (as the agent answers an unknown type), and
    // logged once per connection so an agent cannot flood the log.
    std::lock_guard<std::mutex> lk(mu_);
    if (!warned_unexpected_) {
      warned_unexpected_ = true;
      SKIFF_LOG(Warn) << "agent sent an unexpected " << TypeName(f.type) << " frame (type "
                      << int(static_cast<uint8_t>(f.type)) << ") on stream " << f.stream
                      << "; ignored (further ones are not logged)";
    }
    return OkStatus();
  }
  if (f.type == Type::kCredit) {
    auto c = DecodeCredit(f.payload);
    std::lock_guard<std::mutex> lk(mu_);
    auto it = streams_.find(f.stream);
    if (c && f.flags < kChannels && it != streams_.end()) {
      it->second->send_credit_[f.flags] += *c;
      cv_.notify_all();
    }
    return OkStatus();
  }
  Event e;
  switch (f.type) {
    case Type::kData:
      e.kind = Event::Kind::kData;
      break;
    case Type::kEnd:
      e.kind = Event::Kind::kEnd;
      break;
    case Type::kMeta:
      e.kind = Event::Kind::kMeta;
      break;
    case Type::kResult:
      e.kind = Event::Kind::kResult;
      break;
    default:
      e.kind = Event::Kind::kError;
      break;
  }
  e.channel = f.flags;
  e.data = std::move(f.payload);  // DATA bytes, or the raw JSON Next() parses
  std::unique_lock<std::mutex> lk(mu_);
  if (f.stream % 2 == 0 || f.stream >= next_id_)
    return Error(Code::kS300, "protocol: " + std::string(TypeName(f.type)) + " frame on stream " +
                                  std::to_string(f.stream) + ", which the host never opened");
  auto it = streams_.find(f.stream);
  if (it != streams_.end()) {
    SKIFF_RETURN_IF_ERROR(it->second->Deliver(std::move(e)));
    cv_.notify_all();
    return OkStatus();
  }
  auto ab = abandoned_.find(f.stream);
  if (ab == abandoned_.end()) return OkStatus();  // finished, or forgotten long ago: dropped
  if (e.kind == Event::Kind::kResult || e.kind == Event::Kind::kError) {
    abandoned_.erase(ab);
    return OkStatus();
  }
  if (e.kind != Event::Kind::kData || e.data.empty()) return OkStatus();
  if (e.channel != kStdout && e.channel != kStderr)
    return Error(Code::kS300, "protocol: DATA on channel " + std::to_string(e.channel) + " on stream " +
                                  std::to_string(f.stream) + ", which the agent does not write");
  if (e.data.size() > ab->second.window[e.channel])
    return Error(Code::kS300, "protocol: the agent exceeded the credit window: " +
                                  std::to_string(e.data.size()) + " bytes of DATA on channel " +
                                  std::to_string(e.channel) + " on stream " + std::to_string(f.stream) +
                                  " with " + std::to_string(ab->second.window[e.channel]) + " granted");
  // An abandoned stream: its credit goes straight back (the window stays
  // as it was) so the agent never stalls on a reader that went away. The
  // write happens outside mu_: an agent that does not read blocks only the
  // reader, never the callers or Close().
  lk.unlock();
  GrantFromReader(f.stream, e.channel, static_cast<uint32_t>(e.data.size()));
  return OkStatus();
}

Result<std::shared_ptr<Stream>> Client::Open(const nlohmann::json& request) {
  std::string payload = request.dump();
  if (payload.size() > kMaxPayload) return InvalidRequest("request too large for one frame");
  uint32_t id;
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) return Platform("sandbox", "agent channel closed: " + failure_);
    id = next_id_;
    next_id_ += 2;
    s.reset(new Stream(shared_from_this(), id));
    streams_[id] = s.get();
  }
  SKIFF_RETURN_IF_ERROR(WriteRaw(EncodeFrame(id, Type::kOpen, 0, payload)));
  return s;
}

Result<nlohmann::json> Client::Call(const nlohmann::json& request,
                                    std::optional<Clock::time_point> deadline) {
  SKIFF_ASSIGN_OR_RETURN(auto s, Open(request));
  SKIFF_RETURN_IF_ERROR(s->End(kStdin));
  for (;;) {
    auto e = s->Next(deadline);
    if (!e)
      return Platform("sandbox",
                      "agent did not answer " + request.value("op", std::string("request")) + " in time");
    switch (e->kind) {
      case Event::Kind::kResult:
        return std::move(e->json);
      case Event::Kind::kError: {
        auto code = CodeFromName(e->json.value("code", std::string("S300")));
        return Error(code.value_or(Code::kS300), e->json.value("message", std::string("agent error")));
      }
      case Event::Kind::kClosed:
        return Platform("sandbox", "agent channel closed: " + e->json.value("message", std::string()));
      default:
        break;  // META / DATA are not expected by simple calls; ignore
    }
  }
}

void Client::ReaderLoop() {
  Decoder dec;
  constexpr size_t kReadSize = size_t{512} * 1024;
  std::string why;
  CloseReason reason = CloseReason::kIoError;
  for (;;) {
    {
      // Back pressure: with too much queued for callers, read nothing more
      // until they consume (or the host closes the connection).
      std::unique_lock<std::mutex> lk(mu_);
      if (queued_bytes_ >= kMaxQueuedBytes) {
        reader_paused_ = true;
        cv_.wait(lk, [&] { return dead_ || suspending_ || queued_bytes_ < kMaxQueuedBytes; });
        reader_paused_ = false;
      }
      if (suspending_) break;
      if (dead_) {
        why = "closed by host";
        reason = CloseReason::kClosedByHost;
        break;
      }
    }
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      why = "poll failed";
      reason = CloseReason::kIoError;
      break;
    }
    if (p[1].revents) {
      why = "closed by host";
      reason = CloseReason::kClosedByHost;
      break;
    }
    std::span<char> room = dec.Room(kReadSize);
    ssize_t n = ::read(fd_.get(), room.data(), room.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      // A peer that closes with our bytes unread resets the connection: it
      // hung up all the same.
      reason = errno == ECONNRESET ? CloseReason::kAgentHungUp : CloseReason::kIoError;
      why = std::string("read: ") + std::string(ErrnoName(errno));
      break;
    }
    if (n == 0) {
      why = "agent closed the channel (the sandbox died or was stopped)";
      reason = CloseReason::kAgentHungUp;
      break;
    }
    dec.Commit(static_cast<size_t>(n));
    bool fatal = false;
    for (;;) {
      auto next = dec.Next();
      Status st = next.ok() ? OkStatus() : Status(next.error());
      if (st.ok()) {
        if (!*next) break;
        st = OnFrame(std::move(**next));
      }
      if (!st.ok()) {
        why = st.error().message();
        reason = CloseReason::kProtocolError;
        fatal = true;
        break;
      }
    }
    if (fatal) {
      // The channel cannot be trusted any further: the agent sees its end
      // at once, and the death path tears the sandbox down.
      SKIFF_LOG(Warn) << "agent channel closed: " << why;
      ::shutdown(fd_.get(), SHUT_RDWR);
      break;
    }
  }
  std::function<void(const std::string&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (suspending_ && !dead_) {
      // Suspend: the streams end, the connection does not.
      for (auto& [id, s] : streams_) {
        Event e;
        e.kind = Event::Kind::kClosed;
        e.json = {{"message", "the sandbox hibernated; requests in flight ended"}};
        e.close_reason = CloseReason::kClosedByHost;
        s->DeliverClosed(std::move(e));
      }
      streams_.clear();
      abandoned_.clear();
      queued_bytes_ = 0;
      suspended_ = true;
      cv_.notify_all();
      return;
    }
    bool was_dead = dead_;
    Fail(reason, why);
    if (!was_dead) cb = on_death_;
  }
  if (cb) cb(why);
}

Status Client::Suspend() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (dead_) return Platform("sandbox", "agent channel closed: " + failure_);
    if (suspending_) return Platform("sandbox", "the agent channel is already suspended");
    suspending_ = true;
    cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lk(write_mu_);
    holding_ = true;
  }
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
  char drain[64];
  while (::read(wake_[0], drain, sizeof drain) > 0) {
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!suspended_) return Platform("sandbox", "agent channel closed: " + failure_);
  return OkStatus();
}

Result<std::shared_ptr<Client>> Client::Dormant() {
  std::shared_ptr<Client> c(new Client(UniqueFd()));
  if (::pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) < 0) return Error::Sys(Code::kS300, "pipe2", "wake", errno);
  c->holding_ = true;
  c->suspending_ = true;
  c->suspended_ = true;
  return c;
}

bool Client::suspended() const {
  std::lock_guard<std::mutex> lk(mu_);
  return suspended_;
}

Status Client::Rebind(UniqueFd fd, std::chrono::milliseconds timeout) {
  Result<nlohmann::json> h = ReadHello(fd.get(), timeout);
  std::function<void(const std::string&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!suspended_ || dead_) return Platform("sandbox", "the agent channel is not suspended");
    if (!h.ok()) {
      Fail(CloseReason::kIoError, "after hibernation: " + h.error().message());
      cb = on_death_;
    }
  }
  if (cb) {
    cb(failure());
    return std::move(h).error();
  }
  {
    std::lock_guard<std::mutex> wl(write_mu_);
    fd_ = std::move(fd);
    held_.clear();
    holding_ = false;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    hello_ = std::move(h).value();
    suspending_ = false;
    suspended_ = false;
  }
  SKIFF_RETURN_IF_ERROR(WriteRaw(EncodeHostHello()));
  // Guarded as in Connect.
  reader_ = std::thread([raw = this] { RunGuarded("agent reader", [raw] { raw->ReaderLoop(); }); });
  return OkStatus();
}

}  // namespace skiff::proto
