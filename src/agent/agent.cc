#include "agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "agent/dir_watch.h"
#include "agent/exec_engine.h"
#include "agent/fs_ops.h"
#include "agent/fs_pool.h"
#include "agent/port_tunnel.h"
#include "agent/process_streams.h"
#include "agent/process_table.h"
#include "agent/system_usage.h"
#include "agent/vm_init.h"
#include "base/log.h"
#include "base/version.h"
#include "protocol/frame.h"
#include "protocol/hello.h"
#include "protocol/messages.h"
#include "protocol/ops.h"

namespace skiff::agent {
namespace {

using nlohmann::json;
using proto::Type;

// Above this much queued output, the agent stops producing more (pipes and
// files are not read) until the host drains the channel.
constexpr size_t kOutHighWater = 8u << 20;
// Frames at least this large are sent without being copied into out_ first
// when nothing is queued before them (Loop::SendDirect).
constexpr size_t kDirectSend = 16u << 10;
// Bytes read from the host channel per read(), straight into the decoder.
constexpr size_t kReadSize = size_t{512} * 1024;
// At most this many requests at once.
constexpr size_t kMaxStreams = 4096;
// Credit is capped so a hostile or buggy host cannot overflow counters.
constexpr uint64_t kMaxCredit = uint64_t{1} << 40;

int64_t BootMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

enum class Kind { kExec, kWrite, kRead, kDrain, kProc, kFsOp, kQuiesce, kWatch, kPort };

// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct StreamState {
  uint32_t id = 0;
  Kind kind = Kind::kDrain;
  uint64_t credit[proto::kChannels] = {proto::kInitialWindow, proto::kInitialWindow, proto::kInitialWindow};
  // exec (exec_engine.h)
  std::unique_ptr<Exec> exec;
  // proc.output / proc.input / proc.wait (process_streams.h)
  std::unique_ptr<ProcStream> proc;
  // port.connect (port_tunnel.h)
  std::unique_ptr<PortTunnel> port;
  // fs.write
  std::optional<AtomicWrite> write;
  bool write_metadata = false;  // the write sets metadata (FsWriteResult::metadata_set)
  // fs.read
  UniqueFd rfd;
  // fs.ls, fs.stat, ... on the FsPool: its job, until its answer comes
  uint64_t fs_job = 0;
  // fs.watch: its inotify watch; its event lines wait in pending[kStdout]
  std::unique_ptr<DirWatch> watch;
  // drain (and fs.watch's lines): queued bytes per channel, then END, then `final`
  std::string pending[proto::kChannels];
  size_t pending_off[proto::kChannels] = {0, 0, 0};
  bool pending_end[proto::kChannels] = {false, false, false};
  Type final_type = Type::kResult;
  json final;
};

// The event loop: channel I/O and framing, request dispatch, credit flow,
// and the streams of fs.write/fs.read and queued answers. Execs are run by
// the ExecEngine, which writes its frames through this loop (ExecSink);
// live processes live in the ProcessTable and their proc.* requests are
// run by ProcessStreams, through the same sink. The other fs operations run
// on the FsPool's workers; their answers come back through its fd and are
// sent from here, like every frame.
class Loop final : private ExecSink {
 public:
  Loop(UniqueFd ch, const AgentOptions& opt)
      : ch_(std::move(ch)),
        opt_(opt),
        engine_(opt.child_policy, *this),
        table_(opt.child_policy),
        procs_(table_, *this),
        ports_(*this) {}
  int Run();

 private:
  // Output (ExecSink).
  void Send(uint32_t stream, Type t, uint8_t flags, std::string_view payload) override {
    if (out_off_ == out_.size() && payload.size() >= kDirectSend && !channel_failed_ && !Held()) {
      SendDirect(stream, t, flags, payload);
      return;
    }
    proto::AppendFrame(out_, stream, t, flags, payload);
  }
  // With nothing queued before it, a large frame goes to the channel
  // straight from `payload` (header and body gathered in one call); only
  // what the channel does not take now is queued.
  void SendDirect(uint32_t stream, Type t, uint8_t flags, std::string_view payload);
  void SendJson(uint32_t stream, Type t, const json& j) override {
    Send(stream, t, 0, j.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  void SendError(uint32_t stream, const Error& e);
  void SendResult(uint32_t stream, const json& j);
  void SendResultText(uint32_t stream, std::string text);
  void GrantCredit(uint32_t stream, uint8_t ch, uint64_t n) override {
    while (n > 0) {
      auto part = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
      out_ += proto::EncodeCredit(stream, ch, part);
      n -= part;
    }
  }
  bool OutputRoom() const override { return out_.size() - out_off_ < kOutHighWater; }
  bool Flush();  // false when the channel is dead
  // Quiesced (messages.h, quiesce): out_ is written up to hold_at_ only.
  bool Held() const { return hold_at_ != kNoHold; }
  size_t FlushEnd() const { return Held() ? hold_at_ : out_.size(); }

  // Input.
  void OnFrame(const proto::Frame& f);
  void OnResume(const json& r);
  void StartQuiesce(uint32_t id, const json& req);
  void EndQuiesce(StreamState& s);
  // A copy restored from a live VM's snapshot: the source's streams and
  // queued output were for the source's host; drop them.
  void DropSession();
  void SendHello(bool restored);
  void OnOpen(uint32_t id, const std::string& payload);
  void StartExec(uint32_t id, const json& req);
  void StartWrite(uint32_t id, const json& req);
  void StartRead(uint32_t id, const json& req);
  void StartProc(uint32_t id, const std::string& op, const json& req);
  void StartPort(uint32_t id, const json& req);
  void StartFsOp(uint32_t id, FsOpFn op, json req);
  void StartWatch(uint32_t id, const json& req);
  void OnFsOpsFinished();

  // Streams.
  void PumpRead(StreamState& s);
  void PumpDrain(StreamState& s);
  void PumpWatch(StreamState& s);
  void Reap();
  void KillEverything();

  UniqueFd ch_;
  AgentOptions opt_;
  UniqueFd sigfd_;
  proto::Decoder dec_;
  std::string out_;
  size_t out_off_ = 0;
  static constexpr size_t kNoHold = static_cast<size_t>(-1);
  size_t hold_at_ = kNoHold;
  uint32_t quiesce_stream_ = 0;   // the open quiesce stream, 0 when none
  bool channel_failed_ = false;   // a direct send failed: Flush() reports it
  std::unique_ptr<char[]> bulk_;  // fs.read body buffer, with a header slot
  bool hello_ = false;
  bool shutdown_ = false;
  bool channel_eof_ = false;
  int64_t ready_ms_ = 0;
  bool restored_ = false;  // resumed from a snapshot
  std::map<uint32_t, std::unique_ptr<StreamState>> streams_;
  ExecEngine engine_;
  ProcessTable table_;
  ProcessStreams procs_;
  PortTunnels ports_;
  FsPool pool_;
};

void Loop::SendError(uint32_t stream, const Error& e) {
  SendJson(stream, Type::kError, proto::AgentError::FromError(e).ToJson());
}

void Loop::SendResult(uint32_t stream, const json& j) {
  SendResultText(stream, j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void Loop::SendResultText(uint32_t stream, std::string text) {
  if (text.size() <= proto::kMaxPayload) {
    Send(stream, Type::kResult, 0, text);
    return;
  }
  // Too big for one frame: the JSON travels as DATA on kStdout (under the
  // host's credit), then END, then RESULT {"result_in_data": true}.
  auto s = std::make_unique<StreamState>();
  s->id = stream;
  s->kind = Kind::kDrain;
  s->pending[proto::kStdout] = std::move(text);
  s->pending_end[proto::kStdout] = true;
  s->final = json{{"result_in_data", true}};  // see protocol/messages.h
  streams_[stream] = std::move(s);
}

void Loop::SendDirect(uint32_t stream, Type t, uint8_t flags, std::string_view payload) {
  char header[proto::kHeaderSize];
  proto::EncodeHeader(header, static_cast<uint32_t>(payload.size()), stream, t, flags);
  iovec iov[2] = {{header, sizeof header}, {const_cast<char*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t n;
  do {
    n = ::sendmsg(ch_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::writev(ch_.get(), iov, 2);  // a VM's serial port
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno != EAGAIN) channel_failed_ = true;
    n = 0;
  }
  auto sent = static_cast<size_t>(n);
  if (sent < sizeof header) out_.append(header + sent, sizeof header - sent);
  size_t body = sent > sizeof header ? sent - sizeof header : 0;
  out_.append(payload.substr(body));
}

bool Loop::Flush() {
  if (channel_failed_) return false;
  while (out_off_ < FlushEnd()) {
    ssize_t n = ::send(ch_.get(), out_.data() + out_off_, FlushEnd() - out_off_, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(ch_.get(), out_.data() + out_off_, FlushEnd() - out_off_);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      return false;
    }
    out_off_ += static_cast<size_t>(n);
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
    if (Held()) hold_at_ = 0;
  } else if (out_off_ > (1u << 20)) {
    out_.erase(0, out_off_);
    if (Held()) hold_at_ -= out_off_;
    out_off_ = 0;
  }
  return true;
}

// The host restored this VM from a snapshot (docs/microvm.md, "Snapshots")
// and sends, before its own HELLO, what makes the copy this sandbox's own.
// Only a VM guest accepts it, only before the host's HELLO; a guest that
// cannot apply it ends rather than serve a copied CRNG state.
void Loop::OnResume(const json& r) {
  // A template is saved before the host's HELLO; a live VM is saved while
  // quiesced (its copy is told so by this HELLO).
  if (!opt_.vm || (hello_ && quiesce_stream_ == 0)) {
    SKIFF_LOG(Warn) << "resume ignored: " << (opt_.vm ? "after the host's HELLO" : "not a VM guest");
    return;
  }
  if (quiesce_stream_ != 0) DropSession();
  auto resume = proto::Resume::FromJson(r);
  Status st = OkStatus();
  if (!resume.ok()) {
    st = resume.error();
  } else {
    // Resume::FromJson checked the seed is lower-case hex of even length.
    std::string& h = resume->seed_hex;
    auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    std::string seed;
    for (size_t i = 0; i + 1 < h.size(); i += 2) seed += static_cast<char>(nib(h[i]) * 16 + nib(h[i + 1]));
    st = VmResume(seed, resume->realtime_ns, resume->hostname.value_or(std::string()));
    explicit_bzero(seed.data(), seed.size());
    explicit_bzero(h.data(), h.size());
  }
  if (!st.ok()) VmPowerOff("skiff-agent: resume: " + st.error().message());
  restored_ = true;
  ready_ms_ = BootMs();
  SendHello(true);
}

void Loop::StartQuiesce(uint32_t id, const json& req) {
  auto q = proto::QuiesceRequest::FromJson(req);
  if (!q.ok()) return SendError(id, q.error());
  if (quiesce_stream_ != 0) return SendError(id, InvalidRequest("the channel is already quiesced"));
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kQuiesce;
  streams_[id] = std::move(s);
  quiesce_stream_ = id;
  // Everything queued so far, then this META, reaches the host; nothing after.
  SendJson(id, Type::kMeta, proto::EmptyResult{}.ToJson());
  hold_at_ = out_.size();
}

void Loop::EndQuiesce(StreamState& s) {
  hold_at_ = kNoHold;
  quiesce_stream_ = 0;
  s.kind = Kind::kDrain;  // finished once its RESULT is queued (Run)
  s.final = proto::EmptyResult{}.ToJson();
}

void Loop::DropSession() {
  for (auto& [id, s] : streams_) {
    switch (s->kind) {
      case Kind::kExec:
        engine_.Cancel(*s->exec);  // nobody waits for it in this copy
        break;
      case Kind::kProc:
        procs_.Cancel(*s->proc);  // detached; background processes run on
        break;
      case Kind::kWrite:
        if (s->write) s->write->Abort();
        break;
      case Kind::kFsOp:
        pool_.Cancel(s->fs_job);
        break;
      default:
        break;
    }
  }
  streams_.clear();
  // Everything before the quiesce META reached the source's host; the rest
  // was for it too.
  out_.clear();
  out_off_ = 0;
  hold_at_ = kNoHold;
  quiesce_stream_ = 0;
  SKIFF_LOG(Info) << "restored from a live snapshot: the source's requests were dropped";
}

void Loop::SendHello(bool restored) {
  proto::AgentHello h;
  h.proto = proto::kVersion;
  h.agent = AgentName();
  h.ops = SupportedOps();
  h.restored = restored;
  out_ += proto::EncodeAgentHello(h);
}

void Loop::OnFrame(const proto::Frame& f) {
  switch (f.type) {
    case Type::kHello: {
      json h = json::parse(f.payload, nullptr, false);
      if (h.is_object() && h.contains("resume")) {
        OnResume(h["resume"]);
        return;
      }
      auto host = proto::HostHello::FromJson(h);
      if (!host.ok() || host->proto != proto::kVersion) {
        SKIFF_LOG(Warn) << "host HELLO is not protocol " << proto::kVersion;
      }
      hello_ = true;
      return;
    }
    case Type::kOpen:
      if (f.stream == 0 || streams_.count(f.stream)) {
        SendError(f.stream, InvalidRequest("stream " + std::to_string(f.stream) + " is already open"));
        return;
      }
      OnOpen(f.stream, f.payload);
      return;
    case Type::kCredit: {
      auto it = streams_.find(f.stream);
      auto c = proto::DecodeCredit(f.payload);
      if (it == streams_.end() || !c || f.flags >= proto::kChannels) return;
      auto& cr = it->second->credit[f.flags];
      cr = std::min(kMaxCredit, cr + *c);
      return;
    }
    case Type::kData: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end() || f.flags != proto::kStdin) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kExec) {
        engine_.OnStdin(*s.exec, f.payload);
      } else if (s.kind == Kind::kProc) {
        procs_.OnData(*s.proc, f.payload);
      } else if (s.kind == Kind::kPort) {
        ports_.OnData(*s.port, f.payload);
      } else if (s.kind == Kind::kWrite && s.write) {
        auto st = s.write->Append(f.payload);
        if (!st.ok()) {
          s.write.reset();
          SendError(s.id, st.error());
          streams_.erase(it);
          return;
        }
        GrantCredit(s.id, proto::kStdin, f.payload.size());
      }
      return;
    }
    case Type::kEnd: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end() || f.flags != proto::kStdin) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kQuiesce) {
        EndQuiesce(s);
      } else if (s.kind == Kind::kExec) {
        engine_.OnStdinEnd(*s.exec);
      } else if (s.kind == Kind::kProc) {
        procs_.OnEnd(*s.proc);
      } else if (s.kind == Kind::kPort) {
        ports_.OnEnd(*s.port);
      } else if (s.kind == Kind::kWrite && s.write) {
        auto st = s.write->Commit();
        uint64_t n = s.write->written();
        s.write.reset();
        if (st.ok()) {
          SendResult(s.id, proto::FsWriteResult{static_cast<int64_t>(n), s.write_metadata}.ToJson());
        } else {
          SendError(s.id, st.error());
        }
        streams_.erase(it);
      }
      return;
    }
    case Type::kCancel: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end()) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kQuiesce) {
        EndQuiesce(s);
        return;
      }
      if (s.kind == Kind::kExec) {
        engine_.Cancel(*s.exec);
        return;
      }
      if (s.kind == Kind::kProc) {
        procs_.Cancel(*s.proc);  // finished: dropped by the next round
        return;
      }
      if (s.kind == Kind::kWatch) {
        // The host's way to end a watch: not an error.
        SendResult(s.id, proto::EmptyResult{}.ToJson());
        streams_.erase(it);
        return;
      }
      if (s.kind == Kind::kPort) {
        ports_.Cancel(*s.port);  // closed; dropped by the next round
        return;
      }
      if (s.kind == Kind::kWrite && s.write) s.write->Abort();
      // A queued operation never runs; a running one ends on its worker,
      // unreported (the host has its answer: this error).
      if (s.kind == Kind::kFsOp) pool_.Cancel(s.fs_job);
      SendError(s.id, Error(Code::kS218, "fs channel aborted: cancelled by the host"));
      streams_.erase(it);
      return;
    }
    default:
      // Unknown frame types and agent->host types sent by the host.
      SendError(f.stream, Error(Code::kS219, "operation not supported by this sandbox's agent: frame type " +
                                                 std::to_string(static_cast<int>(f.type))));
      return;
  }
}

void Loop::OnOpen(uint32_t id, const std::string& payload) {
  json req = json::parse(payload, nullptr, false);
  if (req.is_discarded() || !req.is_object())
    return SendError(id, InvalidRequest("request is not a JSON object"));
  if (!req.contains("op") || !req["op"].is_string())
    return SendError(id, InvalidRequest("op: expected a string"));
  if (streams_.size() >= kMaxStreams)
    return SendError(id, Platform("sandbox", "agent has too many open requests"));
  std::string op = req["op"].get<std::string>();
  namespace o = proto::op;
  Result<json> r = json();
  try {
    if (op == o::kExec) return StartExec(id, req);
    if (op == o::kFsWrite) return StartWrite(id, req);
    if (op == o::kFsRead) return StartRead(id, req);
    if (op == o::kQuiesce) return StartQuiesce(id, req);
    if (op == o::kFsWatch) return StartWatch(id, req);
    if (ProcessStreams::IsProcOp(op)) return StartProc(id, op, req);
    if (op == o::kPortConnect) return StartPort(id, req);
    if (op == o::kInfo) {
      auto info = proto::InfoRequest::FromJson(req);
      if (!info.ok()) return SendError(id, info.error());
      utsname u{};
      ::uname(&u);
      proto::InfoResult ir;
      ir.proto = proto::kVersion;
      ir.agent = AgentName();
      ir.kernel = u.release;
      ir.ready_ms = ready_ms_;
      ir.pid = ::getpid();
      ir.restored = restored_;
      r = ir.ToJson();
    } else if (op == o::kClock) {
      auto c = proto::ClockRequest::FromJson(req);
      if (!c.ok()) return SendError(id, c.error());
      // A jail's clock is the host's own, and its root may not set it.
      if (!opt_.vm) return SendError(id, Error(Code::kS219, "clock: only a VM guest sets its clock"));
      Status st = VmSetClock(c->realtime_ns);
      if (!st.ok()) return SendError(id, st.error());
      r = proto::EmptyResult{}.ToJson();
    } else if (op == o::kUsage) {
      auto u = proto::UsageRequest::FromJson(req);
      if (!u.ok()) return SendError(id, u.error());
      Result<proto::UsageResult> usage = ReadSystemUsage();
      if (!usage.ok()) return SendError(id, usage.error());
      r = usage->ToJson();
    } else if (op == o::kShutdown) {
      auto sd = proto::ShutdownRequest::FromJson(req);
      if (!sd.ok()) return SendError(id, sd.error());
      shutdown_ = true;
      r = proto::EmptyResult{}.ToJson();
    } else if (FsOpFn fs_op = FindFsOp(op)) {
      return StartFsOp(id, fs_op, std::move(req));
    } else {
      r = Error(Code::kS219, "operation not supported by this sandbox's agent: " + op);
    }
  } catch (const std::exception& e) {
    // nlohmann::json type errors on hostile input, std::bad_alloc, ...
    r = InvalidRequest(std::string("malformed request: ") + e.what());
  }
  if (r.ok()) {
    SendResult(id, *r);
  } else {
    SendError(id, r.error());
  }
}

void Loop::StartExec(uint32_t id, const json& req) {
  auto s = std::make_unique<StreamState>();
  s->id = id;
  auto started = engine_.Start(id, req, s->credit);
  if (!started.ok()) return SendError(id, started.error());
  if (started->exec == nullptr) {
    // Reported as a normal result: stderr text, exit 127/126.
    s->kind = Kind::kDrain;
    s->pending[proto::kStderr] = std::move(started->stderr_text);
    s->pending_end[proto::kStdout] = true;
    s->pending_end[proto::kStderr] = true;
    s->final = std::move(started->result);
  } else {
    s->kind = Kind::kExec;
    s->exec = std::move(started->exec);
  }
  streams_[id] = std::move(s);
}

void Loop::StartWrite(uint32_t id, const json& req) {
  auto r = proto::FsWriteRequest::FromJson(req);
  if (!r.ok()) return SendError(id, r.error());
  auto w = AtomicWrite::Begin(r->path, r->mode, r->parents);
  if (!w.ok()) return SendError(id, w.error());
  bool metadata = !r->metadata.empty();
  w->SetMetadata(std::move(r->metadata));
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kWrite;
  s->write.emplace(std::move(*w));
  s->write_metadata = metadata;
  streams_[id] = std::move(s);
}

void Loop::StartRead(uint32_t id, const json& req) {
  auto r = proto::FsReadRequest::FromJson(req);
  if (!r.ok()) return SendError(id, r.error());
  auto h = OpenForRead(r->path);
  if (!h.ok()) return SendError(id, h.error());
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kRead;
  s->rfd = std::move(h->fd);
  SendJson(id, Type::kMeta, h->meta.ToJson());
  streams_[id] = std::move(s);
}

void Loop::StartProc(uint32_t id, const std::string& op, const json& req) {
  auto s = std::make_unique<StreamState>();
  s->id = id;
  auto r = procs_.Open(id, op, req, s->credit);
  if (!r.ok()) return SendError(id, r.error());
  if (!r->stream) return SendResult(id, r->result);
  s->kind = Kind::kProc;
  s->proc = std::move(r->stream);
  streams_[id] = std::move(s);
}

void Loop::StartPort(uint32_t id, const json& req) {
  auto s = std::make_unique<StreamState>();
  s->id = id;
  auto t = ports_.Open(id, req, s->credit);
  if (!t.ok()) return SendError(id, t.error());
  s->kind = Kind::kPort;
  s->port = std::move(t).value();
  streams_[id] = std::move(s);
}

void Loop::StartFsOp(uint32_t id, FsOpFn op, json req) {
  if (pool_.workers() == 0) {
    // No threads could be had: run it here, as a single-threaded agent.
    Result<std::string> r = RunFsOp(op, req);
    if (!r.ok()) return SendError(id, r.error());
    return SendResultText(id, std::move(r).value());
  }
  auto job = pool_.Submit(id, op, std::move(req));
  if (!job.ok()) return SendError(id, job.error());
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kFsOp;
  s->fs_job = *job;
  streams_[id] = std::move(s);
}

void Loop::StartWatch(uint32_t id, const json& req) {
  auto r = proto::FsWatchRequest::FromJson(req);
  if (!r.ok()) return SendError(id, r.error());
  auto w = DirWatch::Begin(r->path, r->recursive);
  if (!w.ok()) return SendError(id, w.error());
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kWatch;
  s->watch = std::move(w).value();
  SendJson(id, Type::kMeta, proto::EmptyResult{}.ToJson());
  streams_[id] = std::move(s);
}

// Answers of the pool's operations. One whose stream is gone (cancelled) or
// is another request's now is dropped: a stream gets one final frame.
void Loop::OnFsOpsFinished() {
  for (FsPool::Finished& f : pool_.TakeFinished()) {
    auto it = streams_.find(f.id);
    if (it == streams_.end() || it->second->kind != Kind::kFsOp || it->second->fs_job != f.job) continue;
    streams_.erase(it);
    if (f.answer.ok()) {
      SendResultText(f.id, std::move(f.answer).value());
    } else {
      SendError(f.id, f.answer.error());
    }
  }
}

void Loop::PumpRead(StreamState& s) {
  if (!bulk_) bulk_ = std::make_unique<char[]>(proto::kHeaderSize + proto::kChunk);
  char* body = bulk_.get() + proto::kHeaderSize;
  for (int rounds = 0; rounds < 4; ++rounds) {
    if (!OutputRoom() || s.credit[proto::kStdout] == 0) return;
    size_t want = static_cast<size_t>(std::min<uint64_t>(proto::kChunk, s.credit[proto::kStdout]));
    ssize_t n = ::read(s.rfd.get(), body, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      SendError(s.id, FsError(errno, "read"));
      s.kind = Kind::kDrain;  // marks it finished (see Run)
      s.final = nullptr;
      return;
    }
    if (n == 0) {
      Send(s.id, Type::kEnd, proto::kStdout, {});
      SendJson(s.id, Type::kResult, proto::EmptyResult{}.ToJson());
      s.kind = Kind::kDrain;
      s.final = nullptr;
      return;
    }
    s.credit[proto::kStdout] -= static_cast<uint64_t>(n);
    proto::EncodeHeader(bulk_.get(), static_cast<uint32_t>(n), s.id, Type::kData, proto::kStdout);
    size_t len = proto::kHeaderSize + static_cast<size_t>(n), sent = 0;
    if (out_off_ == out_.size() && !Held()) {
      // Nothing queued: send straight from the read buffer, queue only
      // what the socket did not take.
      ssize_t w = ::send(ch_.get(), bulk_.get(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && errno == ENOTSOCK) w = ::write(ch_.get(), bulk_.get(), len);
      if (w > 0) sent = static_cast<size_t>(w);
    }
    out_.append(bulk_.get() + sent, len - sent);
  }
}

void Loop::PumpDrain(StreamState& s) {
  for (uint8_t ch = 0; ch < proto::kChannels; ++ch) {
    std::string& p = s.pending[ch];
    while (s.pending_off[ch] < p.size()) {
      if (!OutputRoom() || s.credit[ch] == 0) return;
      size_t n = static_cast<size_t>(
          std::min<uint64_t>({p.size() - s.pending_off[ch], proto::kChunk, s.credit[ch]}));
      Send(s.id, Type::kData, ch, std::string_view(p).substr(s.pending_off[ch], n));
      s.pending_off[ch] += n;
      s.credit[ch] -= n;
    }
    if (s.pending_end[ch]) {
      Send(s.id, Type::kEnd, ch, {});
      s.pending_end[ch] = false;
    }
  }
  if (!s.final.is_null()) {
    SendJson(s.id, s.final_type, s.final);
    s.final = nullptr;
  }
}

// A watch's queued lines go out under credit; once none wait, it reads the
// kernel's queue again (Run polls its fd only then). Its end (the directory
// gone) or failure finishes it as a drain: the lines, then END or ERROR.
void Loop::PumpWatch(StreamState& s) {
  std::string& p = s.pending[proto::kStdout];
  size_t& off = s.pending_off[proto::kStdout];
  while (off < p.size() && OutputRoom() && s.credit[proto::kStdout] > 0) {
    size_t n =
        static_cast<size_t>(std::min<uint64_t>({p.size() - off, proto::kChunk, s.credit[proto::kStdout]}));
    Send(s.id, Type::kData, proto::kStdout, std::string_view(p).substr(off, n));
    off += n;
    s.credit[proto::kStdout] -= n;
  }
  if (off == p.size()) {
    p.clear();
    off = 0;
  }
}

// Every child, as PID 1: the exec engine's and the process table's are
// handed to their owner; the rest (orphans, failed spawns) are just reaped.
void Loop::Reap() {
  auto find = [this](uint32_t id) -> Exec* {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second->exec.get();
  };
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    if (!engine_.OnChildExit(pid, st, find)) table_.OnChildExit(pid, st);
  }
}

void Loop::KillEverything() {
  std::vector<Exec*> execs;
  for (auto& [id, s] : streams_)
    if (s->kind == Kind::kExec) execs.push_back(s->exec.get());
  table_.KillAll();
  engine_.KillAll(execs);
}

int Loop::Run() {
  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, SIGCHLD);
  // This thread's mask (sigprocmask is unspecified once there are threads);
  // the fs workers block every signal from their start (fs_pool.h).
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_) {
    SKIFF_LOG(Error) << "signalfd: " << ErrnoName(errno);
    return 1;
  }
  if (int fl = ::fcntl(ch_.get(), F_GETFL); fl >= 0) (void)::fcntl(ch_.get(), F_SETFL, fl | O_NONBLOCK);
  ready_ms_ = VmReadyMillis() >= 0 ? VmReadyMillis() : BootMs();
  SendHello(false);
  Reap();  // anything that died before the loop started

  std::vector<pollfd> pfds;
  std::vector<ExecPollSlots> slots;
  std::vector<std::pair<uint32_t, int>> proc_slots;
  std::vector<std::pair<uint32_t, size_t>> watch_slots;
  std::vector<std::pair<uint32_t, int>> port_slots;
  for (;;) {
    // Live processes' deadlines and expiry.
    table_.Tick(NowMs());
    // Finished streams leave; pending drains progress.
    int64_t tick_now = NowMs();
    for (auto it = streams_.begin(); it != streams_.end();) {
      StreamState& s = *it->second;
      if (s.kind == Kind::kDrain) PumpDrain(s);
      if (s.kind == Kind::kRead) PumpRead(s);
      if (s.kind == Kind::kWatch) PumpWatch(s);
      bool done = false;
      if (s.kind == Kind::kDrain) {
        done = s.final.is_null();
        for (uint8_t ch = 0; ch < proto::kChannels; ++ch)
          done = done && s.pending_off[ch] >= s.pending[ch].size() && !s.pending_end[ch];
      } else if (s.kind == Kind::kExec) {
        done = engine_.Tick(*s.exec, tick_now);
      } else if (s.kind == Kind::kProc) {
        done = procs_.Tick(*s.proc, tick_now);
      } else if (s.kind == Kind::kPort) {
        done = ports_.Tick(*s.port);
      }
      it = done ? streams_.erase(it) : std::next(it);
    }
    if (!Flush()) {
      SKIFF_LOG(Info) << "channel write failed; exiting";
      break;
    }
    if (shutdown_ && out_off_ == out_.size()) break;
    if (channel_eof_) break;

    pfds.clear();
    slots.clear();
    proc_slots.clear();
    watch_slots.clear();
    port_slots.clear();
    pfds.push_back({ch_.get(), static_cast<short>(POLLIN | (out_off_ < FlushEnd() ? POLLOUT : 0)), 0});
    pfds.push_back({sigfd_.get(), POLLIN, 0});
    pfds.push_back({pool_.fd(), POLLIN, 0});  // -1 (ignored by poll) without workers
    int timeout = -1;
    int64_t now = NowMs();
    table_.AddPollFds(pfds, timeout, now);
    for (auto& [id, sp] : streams_) {
      StreamState& s = *sp;
      if (s.kind == Kind::kRead && s.credit[proto::kStdout] > 0 && OutputRoom()) timeout = 0;
      if (s.kind == Kind::kDrain && OutputRoom()) {
        for (uint8_t ch = 0; ch < proto::kChannels; ++ch)
          if (s.pending_off[ch] < s.pending[ch].size() && s.credit[ch] > 0) timeout = 0;
      }
      if (s.kind == Kind::kExec) slots.push_back(engine_.AddPollFds(*s.exec, pfds, timeout, now));
      if (s.kind == Kind::kProc) {
        int slot = procs_.AddPollFds(*s.proc, pfds, timeout, now);
        if (slot >= 0) proc_slots.emplace_back(id, slot);
      }
      if (s.kind == Kind::kWatch && s.credit[proto::kStdout] > 0 && OutputRoom()) {
        if (s.pending_off[proto::kStdout] < s.pending[proto::kStdout].size()) {
          timeout = 0;
        } else {
          watch_slots.emplace_back(id, pfds.size());
          pfds.push_back({s.watch->fd(), POLLIN, 0});
        }
      }
      if (s.kind == Kind::kPort) {
        int slot = ports_.AddPollFds(*s.port, pfds);
        if (slot >= 0) port_slots.emplace_back(id, slot);
      }
    }
    int r = ::poll(pfds.data(), pfds.size(), timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      SKIFF_LOG(Error) << "poll: " << ErrnoName(errno);
      break;
    }
    // Output first: what a process wrote before it exited is in its rings
    // when its exit is seen.
    table_.Pump(pfds);
    if (pfds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd_.get(), &si, sizeof si) > 0) {
      }
      Reap();
    }
    if (pfds[2].revents & POLLIN) OnFsOpsFinished();
    for (const ExecPollSlots& sl : slots) {
      auto it = streams_.find(sl.id);
      if (it == streams_.end() || it->second->kind != Kind::kExec) continue;
      engine_.Pump(*it->second->exec, sl, pfds);
    }
    for (const auto& [id, slot] : proc_slots) {
      auto it = streams_.find(id);
      if (it == streams_.end() || it->second->kind != Kind::kProc) continue;
      procs_.Pump(*it->second->proc, slot, pfds);
    }
    for (const auto& [id, slot] : watch_slots) {
      auto it = streams_.find(id);
      if (it == streams_.end() || it->second->kind != Kind::kWatch || !(pfds[slot].revents & POLLIN))
        continue;
      StreamState& s = *it->second;
      Result<bool> more = s.watch->Read(s.pending[proto::kStdout]);
      if (more.ok() && *more) continue;
      // Over: what was read goes out first, then the end or the error.
      s.watch.reset();
      s.kind = Kind::kDrain;
      if (more.ok()) {
        s.pending_end[proto::kStdout] = true;
        s.final = proto::EmptyResult{}.ToJson();
      } else {
        s.final_type = Type::kError;
        s.final = proto::AgentError::FromError(more.error()).ToJson();
      }
    }
    for (const auto& [id, slot] : port_slots) {
      auto it = streams_.find(id);
      if (it == streams_.end() || it->second->kind != Kind::kPort) continue;
      ports_.Pump(*it->second->port, slot, pfds);
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      std::span<char> room = dec_.Room(kReadSize);
      ssize_t n = ::read(ch_.get(), room.data(), room.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        // retry on the next round
      } else if (n <= 0) {
        SKIFF_LOG(Info) << "channel closed by the host";
        channel_eof_ = true;
        continue;
      } else {
        dec_.Commit(static_cast<size_t>(n));
        for (;;) {
          auto f = dec_.Next();
          if (!f.ok()) {
            SKIFF_LOG(Error) << "corrupt channel: " << f.error().message();
            channel_eof_ = true;
            break;
          }
          if (!*f) break;
          OnFrame(**f);
        }
      }
    }
  }
  // Operations still queued never run; running ones end unreported, and
  // the exit does not wait for them (~FsPool).
  pool_.Stop();
  KillEverything();
  // Give the kernel a moment to deliver the kills, then reap what we can.
  Reap();
  // PID 1 of a VM must not exit (the kernel would panic): end the machine.
  if (opt_.vm) VmPowerOff(shutdown_ ? "" : "skiff-agent: host channel closed");
  return 0;
}

}  // namespace

std::string AgentName() { return std::string("skiff-agent/") + SkiffVersion(); }

std::vector<std::string> SupportedOps() {
  namespace o = proto::op;
  return {std::string(o::kInfo),       std::string(o::kExec),       std::string(o::kShutdown),
          std::string(o::kFsLs),       std::string(o::kFsStat),     std::string(o::kFsMkdir),
          std::string(o::kFsWrite),    std::string(o::kFsRead),     std::string(o::kFsRm),
          std::string(o::kFsMv),       std::string(o::kFsChmod),    std::string(o::kFsGrep),
          std::string(o::kFsSed),      std::string(o::kProcStart),  std::string(o::kProcList),
          std::string(o::kProcOutput), std::string(o::kProcInput),  std::string(o::kProcSignal),
          std::string(o::kProcWait),   std::string(o::kProcResize), std::string(o::kProcForget),
          std::string(o::kQuiesce),    std::string(o::kClock),      std::string(o::kUsage),
          std::string(o::kFsWatch),    std::string(o::kPortConnect)};
}

Status PrepareProcess() {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  if (::sigaction(SIGPIPE, &ign, nullptr) != 0) return Error::Sys(Code::kS300, "sigaction", "SIGPIPE", errno);
  // Not dumpable: sandboxed processes of the same uid cannot ptrace the
  // agent or read its /proc/<pid>/mem, fds or environment.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return Error::Sys(Code::kS300, "prctl", "PR_SET_DUMPABLE", errno);
  ::umask(0);
  if (::chdir("/") < 0) {
    SKIFF_LOG(Warn) << "chdir(/): " << ErrnoName(errno);
  }
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  return OkStatus();
}

int RunAgent(UniqueFd channel, const AgentOptions& options) {
  Loop loop(std::move(channel), options);
  return loop.Run();
}

}  // namespace skiff::agent
