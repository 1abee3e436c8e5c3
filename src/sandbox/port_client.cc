#include "sandbox/port_client.h"

#include <utility>

#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/ops.h"
#include "sandbox/agent_errors.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

PortClient::PortClient(Sandbox& sandbox, std::function<bool()> stopping, std::chrono::milliseconds timeout)
    : sb_(sandbox), stopping_(std::move(stopping)), timeout_(timeout) {}

Error PortClient::TimedOut(std::string_view what) const {
  return Error(Code::kS200, std::string(what) + " on sandbox " + sb_.id +
                                ": the agent did not answer within " + std::to_string(timeout_.count()) +
                                " ms (fs_timeout_ms)");
}

Error PortClient::Ended(const proto::Event& ev) const {
  return StreamEndedError(AgentCall::kProcess, ev, sb_.client->close_reason(), stopping_(), sb_.id);
}

Error PortClient::OpenFailed(const Error& e) const {
  return OpenFailedError(AgentCall::kProcess, e, sb_.client->close_reason(), stopping_(), sb_.id);
}

Error PortClient::Malformed(const std::string& what) const {
  return Error(Code::kS300, "the agent of sandbox " + sb_.id + " broke port.connect: " + what);
}

Result<proto::PortConnectResult> PortClient::Relay(uint16_t port, const ByteSource& upstream,
                                                   PortSink& sink) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto so = sb_.client->Open(proto::PortConnectRequest{port});
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  int64_t last_touch = MonotonicMillis();
  auto activity = [&] {
    if (int64_t now = MonotonicMillis(); now - last_touch >= 1000) {
      sb_.Touch();
      last_touch = now;
    }
  };
  const std::string what = "port.connect to port " + std::to_string(port);

  // The connect: META, or the agent's ERROR (S222 when nothing listens).
  for (;;) {
    auto ev = s->Next(Clock::now() + timeout_);
    if (!ev) {
      s->Cancel();
      return TimedOut(what);
    }
    if (ev->kind == proto::Event::Kind::kMeta) {
      auto m = proto::PortConnectMeta::FromJson(ev->json);
      if (!m.ok()) {
        s->Cancel();
        return std::move(m).error();
      }
      break;
    }
    if (ev->kind == proto::Event::Kind::kError || ev->kind == proto::Event::Kind::kClosed) return Ended(*ev);
    s->Cancel();
    return Malformed("bytes or an answer before the connection was up");
  }
  if (!sink.OnConnected()) {
    s->Cancel();
    return Error(Code::kS216, what + ": the reader went away");
  }

  // The caller's bytes. The server may answer meanwhile: its bytes wait in
  // the stream, under the window the host grants.
  for (;;) {
    auto chunk = upstream();
    if (!chunk.ok()) {
      s->Cancel();
      if (stopping_()) return SandboxStopped(sb_.id);
      return std::move(chunk).error();
    }
    // The caller's bytes are all sent, but the write side stays open: an
    // HTTP server may take a half-closed connection for a client that went
    // away (and abort its answer). It is closed once the server has closed
    // its side, or with the stream.
    if (chunk->empty()) break;
    auto sent = s->Send(proto::kStdin, *chunk, Clock::now() + timeout_);
    if (!sent.ok() && sent.error().code() == Code::kS218) {  // no credit within the deadline
      s->Cancel();
      return TimedOut(what);
    }
    if (!sent.ok()) break;  // the stream ended early: its end is read below
    activity();
  }

  // The server's bytes, until it closes (a quiet server is waited for while
  // the sink still wants its bytes).
  for (;;) {
    auto ev = s->Next(Clock::now() + std::chrono::milliseconds(1000));
    if (!ev) {
      if (!sink.Wanted()) {
        s->Cancel();
        return Error(Code::kS216, what + ": the reader went away");
      }
      continue;
    }
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel != proto::kStdout) {
          s->Cancel();
          return Malformed("bytes on a channel other than stdout");
        }
        activity();
        if (!sink.OnData(ev->data)) {
          s->Cancel();
          return Error(Code::kS216, what + ": the reader went away");
        }
        break;
      case proto::Event::Kind::kEnd:
        // The server closed its side: close ours, so the agent finishes.
        (void)s->End(proto::kStdin);
        break;
      case proto::Event::Kind::kMeta:
        s->Cancel();
        return Malformed("a second META");
      case proto::Event::Kind::kResult: {
        auto r = proto::PortConnectResult::FromJson(ev->json);
        if (!r.ok()) return std::move(r).error();
        return std::move(r).value();
      }
      case proto::Event::Kind::kError:
      case proto::Event::Kind::kClosed:
        return Ended(*ev);
    }
  }
}

}  // namespace skiff
