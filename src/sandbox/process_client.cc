#include "sandbox/process_client.h"

#include <optional>
#include <utility>
#include <variant>

#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/messages.h"
#include "protocol/ops.h"
#include "sandbox/agent_errors.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;

// Marks the sandbox active at most once a second while bytes move.
class ActivityTicker {
 public:
  explicit ActivityTicker(Sandbox& sb) : sb_(sb) {}
  void Tick() {
    int64_t now = MonotonicMillis();
    if (now - last_ < 1000) return;
    sb_.Touch();
    last_ = now;
  }

 private:
  Sandbox& sb_;
  int64_t last_ = MonotonicMillis();
};

}  // namespace

ProcessClient::ProcessClient(Sandbox& sandbox, std::function<bool()> stopping,
                             std::chrono::milliseconds timeout)
    : sb_(sandbox), stopping_(std::move(stopping)), timeout_(timeout) {}

Error ProcessClient::TimedOut(std::string_view op) const {
  return Error(Code::kS200, std::string(op) + " on sandbox " + sb_.id + ": the agent did not answer within " +
                                std::to_string(timeout_.count()) + " ms (fs_timeout_ms)");
}

Error ProcessClient::Ended(const proto::Event& ev) const {
  return StreamEndedError(AgentCall::kProcess, ev, sb_.client->close_reason(), stopping_(), sb_.id);
}

Error ProcessClient::OpenFailed(const Error& e) const {
  return OpenFailedError(AgentCall::kProcess, e, sb_.client->close_reason(), stopping_(), sb_.id);
}

Error ProcessClient::Malformed(const std::string& what) const {
  return Error(Code::kS300, "the agent of sandbox " + sb_.id + " broke proc.output: " + what);
}

Result<nlohmann::json> ProcessClient::Call(const proto::ProcessCall& call) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto deadline = Clock::now() + timeout_;
  if (const auto* w = std::get_if<proto::ProcWaitRequest>(&call); w != nullptr && w->timeout_ms)
    deadline += std::chrono::milliseconds(*w->timeout_ms);
  auto so = sb_.client->Open(proto::ToJson(call));
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  for (;;) {
    auto ev = s->Next(deadline);
    if (!ev) {
      s->Cancel();
      return TimedOut(proto::OpName(call));
    }
    if (ev->kind == proto::Event::Kind::kResult) return proto::CheckAnswer(call, std::move(ev->json));
    if (ev->kind == proto::Event::Kind::kError || ev->kind == proto::Event::Kind::kClosed) return Ended(*ev);
    // META / DATA / END are not part of a one-shot answer: ignored.
  }
}

Result<proto::ProcInfo> ProcessClient::Output(const proto::ProcOutputRequest& req, ProcessOutputSink& sink) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto so = sb_.client->Open(req.ToJson());
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  ActivityTicker activity(sb_);
  std::optional<int64_t> at[3];  // the next offset of each output channel
  auto next_deadline = [&] {
    return Clock::now() + (req.follow ? std::chrono::milliseconds(1000) : timeout_);
  };
  for (;;) {
    auto ev = s->Next(next_deadline());
    if (!ev) {
      if (!req.follow) {
        s->Cancel();
        return TimedOut(proto::op::kProcOutput);
      }
      if (!sink.Wanted()) {
        s->Cancel();
        return Error(Code::kS216, "process output: the reader went away");
      }
      continue;
    }
    switch (ev->kind) {
      case proto::Event::Kind::kMeta: {
        auto m = proto::ProcOutputMeta::FromJson(ev->json);
        if (!m.ok()) {
          s->Cancel();
          return std::move(m).error().With("reading the agent's proc.output META");
        }
        bool more = true;
        if (m->gap) {
          uint8_t ch = m->gap->channel;
          if (!at[ch] || *at[ch] != m->gap->from) {
            s->Cancel();
            return Malformed("a gap that does not start where the channel is");
          }
          at[ch] = m->gap->to;
          more = sink.OnGap(ch, m->gap->from, m->gap->to);
        } else {
          if (at[proto::kStdout]) {
            s->Cancel();
            return Malformed("a second start");
          }
          at[proto::kStdout] = *m->stdout_from;
          at[proto::kStderr] = *m->stderr_from;
          more = sink.OnStart(*m->stdout_from, *m->stderr_from);
        }
        if (!more) {
          s->Cancel();
          return Error(Code::kS216, "process output: the reader went away");
        }
        break;
      }
      case proto::Event::Kind::kData: {
        uint8_t ch = ev->channel;
        if ((ch != proto::kStdout && ch != proto::kStderr) || !at[ch]) {
          s->Cancel();
          return Malformed("output before its start");
        }
        int64_t off = *at[ch];
        at[ch] = off + static_cast<int64_t>(ev->data.size());
        activity.Tick();
        if (!sink.OnData(ch, off, ev->data)) {
          s->Cancel();
          return Error(Code::kS216, "process output: the reader went away");
        }
        break;
      }
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult: {
        auto info = proto::ProcInfo::FromJson(ev->json);
        if (!info.ok()) return std::move(info).error().With("reading the agent's proc.output result");
        return std::move(info).value();
      }
      case proto::Event::Kind::kError:
      case proto::Event::Kind::kClosed:
        return Ended(*ev);
    }
  }
}

Result<proto::ProcInputResult> ProcessClient::Input(const proto::ProcInputRequest& req,
                                                    const ByteSource& source) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto so = sb_.client->Open(req.ToJson());
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  ActivityTicker activity(sb_);
  for (;;) {
    auto chunk = source();
    if (!chunk.ok()) {
      s->Cancel();
      if (stopping_()) return SandboxStopped(sb_.id);
      return std::move(chunk).error();
    }
    if (chunk->empty()) {
      (void)s->End(proto::kStdin);
      break;
    }
    auto sent = s->Send(proto::kStdin, *chunk, Clock::now() + timeout_);
    if (!sent.ok() && sent.error().code() == Code::kS218) {  // no credit within the deadline
      s->Cancel();
      return TimedOut(proto::op::kProcInput);
    }
    if (!sent.ok()) break;  // the agent answered early (an error)
    activity.Tick();
  }
  for (;;) {
    auto ev = s->Next(Clock::now() + timeout_);
    if (!ev) {
      s->Cancel();
      return TimedOut(proto::op::kProcInput);
    }
    if (ev->kind == proto::Event::Kind::kResult) {
      auto r = proto::ProcInputResult::FromJson(ev->json);
      if (!r.ok()) return std::move(r).error().With("reading the agent's proc.input result");
      return std::move(r).value();
    }
    if (ev->kind == proto::Event::Kind::kError || ev->kind == proto::Event::Kind::kClosed) return Ended(*ev);
  }
}

}  // namespace skiff
