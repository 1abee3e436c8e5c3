#include "agent/process_streams.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/pseudo_terminal.h"
#include "base/log.h"
#include "protocol/messages.h"
#include "protocol/ops.h"
#include "protocol/process_messages.h"

namespace skiff::agent {
namespace {

using nlohmann::json;
using proto::Type;

// DATA chunks per channel per round: one busy stream cannot starve the
// others (the loop comes back at once, see AddPollFds).
constexpr int kSendRounds = 4;
// DATA payload per frame of an output stream: four times exec's, so a
// fast stream costs a quarter of the frames and system calls.
constexpr uint64_t kOutputChunk = uint64_t{4} * proto::kChunk;
// Gap METAs a stream may have sent that the host has not provably read:
// with the first META and the two ENDs, within the 8 unconsumed META/END
// frames a host reader holds per stream (kMaxQueuedControl, client.h).
constexpr size_t kMaxUnreadGaps = 4;

Error NotFound(int64_t pid) { return Error(Code::kS220, "no live process " + std::to_string(pid)); }
Error Forgotten(int64_t pid) {
  return Error(Code::kS220, "live process " + std::to_string(pid) + " was forgotten");
}

}  // namespace

bool ProcessStreams::IsProcOp(std::string_view op) {
  namespace o = proto::op;
  return op == o::kProcStart || op == o::kProcList || op == o::kProcOutput || op == o::kProcInput ||
         op == o::kProcSignal || op == o::kProcWait || op == o::kProcResize || op == o::kProcForget;
}

Result<ProcOpen> ProcessStreams::Open(uint32_t id, std::string_view op, const json& req, uint64_t* credit) {
  namespace o = proto::op;
  ProcOpen out;
  if (op == o::kProcOutput) return OpenOutput(id, req, credit);
  if (op == o::kProcInput) return OpenInput(id, req, credit);
  if (op == o::kProcWait) return OpenWait(id, req);
  if (op == o::kProcStart) {
    SKIFF_ASSIGN_OR_RETURN(proto::ProcStartRequest r, proto::ProcStartRequest::FromJson(req));
    SKIFF_ASSIGN_OR_RETURN(proto::ProcInfo info, table_.Start(r));
    out.result = info.ToJson();
  } else if (op == o::kProcList) {
    SKIFF_RETURN_IF_ERROR(proto::ProcListRequest::FromJson(req));
    out.result = proto::ProcListResult{table_.List()}.ToJson();
  } else if (op == o::kProcSignal) {
    SKIFF_ASSIGN_OR_RETURN(proto::ProcSignalRequest r, proto::ProcSignalRequest::FromJson(req));
    std::optional<int> sig = proto::SignalFromName(r.signal);
    if (!sig) return InvalidRequest("signal: unknown name " + r.signal);
    SKIFF_RETURN_IF_ERROR(table_.Signal(r.pid, *sig));
    out.result = proto::EmptyResult{}.ToJson();
  } else if (op == o::kProcResize) {
    SKIFF_ASSIGN_OR_RETURN(proto::ProcResizeRequest r, proto::ProcResizeRequest::FromJson(req));
    SKIFF_RETURN_IF_ERROR(table_.Resize(r.pid, TerminalSize{static_cast<unsigned short>(r.size.rows),
                                                            static_cast<unsigned short>(r.size.cols)}));
    out.result = proto::EmptyResult{}.ToJson();
  } else if (op == o::kProcForget) {
    SKIFF_ASSIGN_OR_RETURN(proto::ProcForgetRequest r, proto::ProcForgetRequest::FromJson(req));
    SKIFF_RETURN_IF_ERROR(table_.Forget(r.pid));
    out.result = proto::EmptyResult{}.ToJson();
  } else {
    return Error(Code::kS219, "operation not supported by this sandbox's agent: " + std::string(op));
  }
  return out;
}

Result<ProcOpen> ProcessStreams::OpenOutput(uint32_t id, const json& req, uint64_t* credit) {
  SKIFF_ASSIGN_OR_RETURN(proto::ProcOutputRequest r, proto::ProcOutputRequest::FromJson(req));
  LiveProcess* p = table_.Find(r.pid);
  if (p == nullptr) return NotFound(r.pid);
  if (p->attached >= proto::kMaxAttachesPerProcess)
    return Error(Code::kS400, "resource limit: at most " + std::to_string(proto::kMaxAttachesPerProcess) +
                                  " output streams per process");
  const OutputRing& out = p->rings[proto::kStdout];
  const OutputRing& err = p->rings[proto::kStderr];
  if (r.stdout_from > out.end())
    return InvalidRequest("stdout_from: " + std::to_string(r.stdout_from) + " is beyond the end of stdout (" +
                          std::to_string(out.end()) + ")");
  if (r.stderr_from > err.end())
    return InvalidRequest("stderr_from: " + std::to_string(r.stderr_from) + " is beyond the end of stderr (" +
                          std::to_string(err.end()) + ")");
  auto s = std::make_unique<ProcStream>();
  s->id = id;
  s->kind = ProcStream::Kind::kOutput;
  s->credit = credit;
  s->pid = r.pid;
  s->serial = p->serial;
  s->follow = r.follow;
  // Bytes the ring no longer holds are skipped; the META says from where
  // each channel really starts.
  s->pos[proto::kStdout] = std::max(r.stdout_from, out.start());
  s->pos[proto::kStderr] = std::max(r.stderr_from, err.start());
  s->stop[proto::kStdout] = out.end();
  s->stop[proto::kStderr] = err.end();
  for (uint8_t ch = 0; ch < proto::kChannels; ++ch) s->base_credit[ch] = credit[ch];
  s->attached = true;
  ++p->attached;
  proto::ProcOutputMeta meta;
  meta.stdout_from = s->pos[proto::kStdout];
  meta.stderr_from = s->pos[proto::kStderr];
  sink_.SendJson(id, Type::kMeta, meta.ToJson());
  ProcOpen o;
  o.stream = std::move(s);
  return o;
}

Result<ProcOpen> ProcessStreams::OpenInput(uint32_t id, const json& req, uint64_t* credit) {
  SKIFF_ASSIGN_OR_RETURN(proto::ProcInputRequest r, proto::ProcInputRequest::FromJson(req));
  LiveProcess* p = table_.Find(r.pid);
  if (p == nullptr) return NotFound(r.pid);
  if (!p->running) return Error(Code::kS221, "process " + std::to_string(r.pid) + " has exited");
  if (p->InputFd() < 0)
    return Error(Code::kS221, "process " + std::to_string(r.pid) + " has no open stdin (closed, or started " +
                                  "without stdin)");
  auto s = std::make_unique<ProcStream>();
  s->id = id;
  s->kind = ProcStream::Kind::kInput;
  s->credit = credit;
  s->pid = r.pid;
  s->serial = p->serial;
  s->close = r.close;
  ProcOpen o;
  o.stream = std::move(s);
  return o;
}

Result<ProcOpen> ProcessStreams::OpenWait(uint32_t id, const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::ProcWaitRequest r, proto::ProcWaitRequest::FromJson(req));
  LiveProcess* p = table_.Find(r.pid);
  if (p == nullptr) return NotFound(r.pid);
  ProcOpen o;
  if (!p->running || (r.timeout_ms && *r.timeout_ms == 0)) {
    o.result = p->Info().ToJson();
    return o;
  }
  auto s = std::make_unique<ProcStream>();
  s->id = id;
  s->kind = ProcStream::Kind::kWait;
  s->pid = r.pid;
  s->serial = p->serial;
  if (r.timeout_ms) s->deadline_ms = NowMs() + std::min<int64_t>(*r.timeout_ms, int64_t{1} << 40);
  o.stream = std::move(s);
  return o;
}

void ProcessStreams::OnData(ProcStream& s, std::string_view bytes) {
  if (s.kind != ProcStream::Kind::kInput || s.finished || s.end_seen) return;
  if (s.buf.size() + bytes.size() > 2 * size_t{proto::kInitialWindow}) {
    // The host ignored its credit; drop rather than grow.
    SKIFF_LOG(Warn) << "stream " << s.id << ": proc.input beyond the granted credit dropped";
    return;
  }
  s.buf.append(bytes);
}

void ProcessStreams::OnEnd(ProcStream& s) {
  if (s.kind != ProcStream::Kind::kInput || s.finished || s.end_seen) return;
  s.end_seen = true;
  LiveProcess* p = table_.Find(s.pid, s.serial);
  if (s.close && p != nullptr && p->pty && p->InputFd() >= 0) {
    // A terminal is not closed: its reader sees end of file from its
    // VEOF character, written after the bytes before it.
    bool line_empty = s.buf.empty() ? p->line_empty : s.buf.back() == '\n';
    s.eof_bytes = EofBytes(p->InputFd(), line_empty);
  }
}

void ProcessStreams::Cancel(ProcStream& s) {
  if (s.finished) return;
  LiveProcess* p = table_.Find(s.pid, s.serial);
  switch (s.kind) {
    case ProcStream::Kind::kOutput:
      if (p == nullptr) return Fail(s, Forgotten(s.pid));
      // Detached: the process runs on; the stream ends as it would.
      for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
        if (!s.ended[ch]) sink_.Send(s.id, Type::kEnd, ch, {});
        s.ended[ch] = true;
      }
      Detach(s);
      return Finish(s, p->Info().ToJson());
    case ProcStream::Kind::kWait:
      if (p == nullptr) return Fail(s, Forgotten(s.pid));
      return Finish(s, p->Info().ToJson());
    case ProcStream::Kind::kInput:
      return Fail(s, Error(Code::kS218, "proc.input aborted: cancelled by the host"));
  }
}

void ProcessStreams::Detach(ProcStream& s) {
  if (!s.attached) return;
  s.attached = false;
  if (LiveProcess* p = table_.Find(s.pid, s.serial)) --p->attached;
}

void ProcessStreams::Finish(ProcStream& s, const json& result) {
  Detach(s);
  sink_.SendJson(s.id, Type::kResult, result);
  s.finished = true;
}

void ProcessStreams::Fail(ProcStream& s, const Error& e) {
  Detach(s);
  sink_.SendJson(s.id, Type::kError, proto::AgentError::FromError(e).ToJson());
  s.finished = true;
}

bool ProcessStreams::GapAllowed(ProcStream& s) {
  // Credit returned so far on a channel: what the host granted beyond the
  // window it started with, plus what it gave back of the bytes sent.
  std::erase_if(s.unread_gaps, [&](const ProcStream::UnreadGap& g) {
    uint64_t returned = s.credit[g.ch] + s.sent[g.ch] - s.base_credit[g.ch];
    return returned > g.sent_before;
  });
  return s.unread_gaps.size() < kMaxUnreadGaps;
}

bool ProcessStreams::SendOutput(ProcStream& s, LiveProcess& p) {
  bool more = false;
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (s.ended[ch]) continue;
    const OutputRing& ring = p.rings[ch];
    int64_t limit = s.follow ? ring.end() : s.stop[ch];
    if (s.pos[ch] < ring.start() && s.pos[ch] < limit) {
      // Only when DATA can follow at once (it is what shows the META was
      // read), and within the cap; otherwise the loss grows until then.
      if (s.credit[ch] == 0 || !sink_.OutputRoom() || !GapAllowed(s)) continue;
      // Overwritten before this stream could send them.
      proto::ProcOutputMeta gap;
      gap.gap = proto::ProcOutputMeta::Gap{ch, s.pos[ch], std::min(ring.start(), limit)};
      sink_.SendJson(s.id, Type::kMeta, gap.ToJson());
      s.unread_gaps.push_back({ch, s.sent[ch]});
      s.pos[ch] = gap.gap->to;
    }
    for (int round = 0; round < kSendRounds && s.pos[ch] < limit; ++round) {
      if (s.credit[ch] == 0 || !sink_.OutputRoom()) break;
      auto want = static_cast<size_t>(
          std::min<uint64_t>({kOutputChunk, s.credit[ch], static_cast<uint64_t>(limit - s.pos[ch])}));
      std::string_view v = ring.View(s.pos[ch], want);
      if (v.empty()) break;
      sink_.Send(s.id, Type::kData, ch, v);
      s.pos[ch] += static_cast<int64_t>(v.size());
      s.credit[ch] -= v.size();
      s.sent[ch] += v.size();
      p.taken[ch] = std::max(p.taken[ch], s.pos[ch]);  // held output: room for more
    }
    if (s.pos[ch] >= limit && (!s.follow || p.Eof(ch))) {
      sink_.Send(s.id, Type::kEnd, ch, {});
      s.ended[ch] = true;
    }
    more = more || (s.pos[ch] < limit && s.credit[ch] > 0 && sink_.OutputRoom());
  }
  return more;
}

bool ProcessStreams::CanSend(const ProcStream& s, const LiveProcess& p) const {
  if (!sink_.OutputRoom()) return false;
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (s.ended[ch]) continue;
    int64_t limit = s.follow ? p.rings[ch].end() : s.stop[ch];
    if (s.pos[ch] >= limit || s.credit[ch] == 0) continue;
    // Behind the ring with the gap cap reached: the host's credit (a
    // frame on the channel) is what wakes the stream.
    if (s.pos[ch] < p.rings[ch].start() && s.unread_gaps.size() >= kMaxUnreadGaps) continue;
    return true;
  }
  return false;
}

bool ProcessStreams::Tick(ProcStream& s, int64_t now) {
  if (s.finished) return true;
  LiveProcess* p = table_.Find(s.pid, s.serial);
  if (p == nullptr) {
    Fail(s, Forgotten(s.pid));
    return true;
  }
  switch (s.kind) {
    case ProcStream::Kind::kOutput:
      SendOutput(s, *p);
      // With follow: once the process exited and both channels reached
      // their end of file and were sent.
      if (s.ended[proto::kStdout] && s.ended[proto::kStderr] && (!s.follow || !p->running)) {
        Detach(s);
        Finish(s, p->Info().ToJson());
      }
      break;
    case ProcStream::Kind::kWait:
      if (!p->running || (s.deadline_ms >= 0 && now >= s.deadline_ms)) Finish(s, p->Info().ToJson());
      break;
    case ProcStream::Kind::kInput:
      if (s.end_seen && s.buf.empty() && s.eof_bytes.empty()) {
        if (s.close) ProcessTable::CloseInput(*p);
        Finish(s, proto::ProcInputResult{s.written}.ToJson());
      } else if (p->InputFd() < 0 && (!s.buf.empty() || !s.eof_bytes.empty())) {
        Fail(s,
             Error(Code::kS221, p->running ? "the stdin of process " + std::to_string(s.pid) + " was closed"
                                           : "process " + std::to_string(s.pid) + " has exited"));
      }
      break;
  }
  return s.finished;
}

int ProcessStreams::AddPollFds(const ProcStream& s, std::vector<pollfd>& pfds, int& timeout,
                               int64_t now) const {
  if (s.finished) {
    timeout = 0;
    return -1;
  }
  LiveProcess* p = table_.Find(s.pid, s.serial);
  if (p == nullptr) {
    timeout = 0;  // Tick ends it
    return -1;
  }
  switch (s.kind) {
    case ProcStream::Kind::kOutput:
      if (CanSend(s, *p)) timeout = 0;
      return -1;
    case ProcStream::Kind::kWait:
      if (s.deadline_ms >= 0) {
        int64_t left = std::max<int64_t>(0, s.deadline_ms - now);
        if (timeout < 0 || left < timeout) timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
      }
      return -1;
    case ProcStream::Kind::kInput: {
      int fd = p->InputFd();
      if (fd < 0 || (s.buf.empty() && s.eof_bytes.empty())) return -1;
      pfds.push_back({fd, POLLOUT, 0});
      return static_cast<int>(pfds.size() - 1);
    }
  }
  return -1;
}

void ProcessStreams::Pump(ProcStream& s, int slot, const std::vector<pollfd>& pfds) {
  if (slot < 0 || static_cast<size_t>(slot) >= pfds.size() || s.finished) return;
  if (!(pfds[slot].revents & (POLLOUT | POLLERR | POLLHUP))) return;
  LiveProcess* p = table_.Find(s.pid, s.serial);
  if (p == nullptr || p->InputFd() < 0) return;  // Tick answers
  while (!s.buf.empty() || !s.eof_bytes.empty()) {
    bool data = !s.buf.empty();
    std::string& b = data ? s.buf : s.eof_bytes;
    ssize_t n = ::write(p->InputFd(), b.data(), b.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n == 0) return;  // nothing taken: wait for the next POLLOUT
    if (n < 0) {
      int err = errno;
      // EPIPE: nobody reads the pipe any more; EIO: the terminal's slave
      // is gone. Either way the process's stdin is closed.
      ProcessTable::CloseInput(*p);
      return Fail(s, Error(Code::kS221, "the stdin of process " + std::to_string(s.pid) + " was closed (" +
                                            std::string(ErrnoName(err)) + ")"));
    }
    auto k = static_cast<size_t>(n);
    if (data) {
      s.written += n;
      p->line_empty = b[k - 1] == '\n';
      sink_.GrantCredit(s.id, proto::kStdin, k);
    }
    b.erase(0, k);
  }
}

}  // namespace skiff::agent
