#include "sandbox/fs_client.h"

#include <optional>
#include <utility>

#include "base/json_limits.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/fs_messages.h"
#include "protocol/ops.h"
#include "sandbox/agent_errors.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;

// Reads a stream to its final event, for fs calls; nullopt when `deadline`
// passes first.
std::optional<Result<nlohmann::json>> FinishFs(proto::Stream& s, const std::string& sandbox_id,
                                               Clock::time_point deadline) {
  // A result too large for one frame arrives as DATA on kStdout first. One
  // over kMaxSpill is read to its end but not kept: no answer the API may
  // send is that large (32 MiB), and its parsed form would cost several times
  // its size in the daemon.
  std::string spill;
  constexpr size_t kMaxSpill = size_t{36} << 20;
  bool over = false;
  for (;;) {
    auto ev = s.Next(deadline);
    if (!ev) return std::nullopt;
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel != proto::kStdout || over) break;
        if (spill.size() + ev->data.size() > kMaxSpill) {
          over = true;
          std::string().swap(spill);
          break;
        }
        spill.append(ev->data);
        break;
      case proto::Event::Kind::kResult: {
        if (!ev->json.value("result_in_data", false)) return std::move(ev->json);
        if (over)
          return Error(Code::kS400, "resource limit exceeded: the sandbox's answer is over " +
                                        std::to_string(kMaxSpill >> 20) +
                                        " MiB; ask for less (a narrower path or pattern, max_matches, "
                                        "max_line_bytes)");
        auto j = ParseJsonBounded(spill);
        if (j.is_discarded())
          return AgentConnectionError(AgentCall::kFs, proto::CloseReason::kProtocolError, "malformed result",
                                      sandbox_id);
        return j;
      }
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed:
        return AgentConnectionError(AgentCall::kFs, ev->close_reason,
                                    ev->json.value("message", std::string()), sandbox_id);
      default:
        break;
    }
  }
}

}  // namespace

FsClient::FsClient(Sandbox& sandbox, std::function<bool()> stopping, std::chrono::milliseconds timeout)
    : sb_(sandbox), stopping_(std::move(stopping)), timeout_(timeout) {}

Clock::time_point FsClient::Deadline() const { return Clock::now() + timeout_; }

Error FsClient::TimedOut(std::string_view op) const {
  return Error(Code::kS200, std::string(op) + " on sandbox " + sb_.id + ": the agent did not answer within " +
                                std::to_string(timeout_.count()) + " ms (fs_timeout_ms)");
}

Result<nlohmann::json> FsClient::Call(const proto::FsCall& call) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto s = sb_.client->Open(proto::ToJson(call));
  if (!s.ok()) return OpenFailed(s.error());
  (void)(*s)->End(proto::kStdin);
  auto finished = FinishFs(**s, sb_.id, Deadline());
  if (!finished) {
    (*s)->Cancel();
    return TimedOut(proto::OpName(call));
  }
  auto& r = *finished;
  if (!r.ok() && r.error().code() == Code::kS004) return SandboxStopped(sb_.id);
  if (!r.ok()) return r;
  return proto::CheckAnswer(call, std::move(*r));
}

Error FsClient::OpenFailed(const Error& e) const {
  return AgentConnectionError(AgentCall::kFs, sb_.client->close_reason(), e.message(), sb_.id);
}

Result<nlohmann::json> FsClient::Write(const std::string& path, uint32_t mode, bool parents,
                                       const ByteSource& source, const proto::FileMetadata& metadata) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  SKIFF_RETURN_IF_ERROR(proto::CheckMetadata(metadata));
  auto so = sb_.client->Open(proto::FsWriteRequest{path, mode, parents, metadata}.ToJson());
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto chunk = source();
    if (!chunk.ok()) {
      s->Cancel();  // the agent removes its temp file; the target is untouched
      (void)FinishFs(*s, sb_.id, Deadline());
      // A stop while the body stalled: the call ends as stopped (docs/api.md#sandboxstop), not
      // as a stalled upload.
      if (stopping_()) return SandboxStopped(sb_.id);
      return std::move(chunk).error();
    }
    if (chunk->empty()) {
      (void)s->End(proto::kStdin);
      break;
    }
    auto sent = s->Send(proto::kStdin, *chunk, Deadline());
    if (!sent.ok() && sent.error().code() == Code::kS218) {  // no credit within the deadline
      s->Cancel();
      return TimedOut(proto::op::kFsWrite);
    }
    if (!sent.ok()) break;  // the agent answered early (an error)
    if (MonotonicMillis() - last_touch > 1000) {
      sb_.Touch();
      last_touch = MonotonicMillis();
    }
  }
  auto finished = FinishFs(*s, sb_.id, Deadline());
  if (!finished) {
    s->Cancel();
    return TimedOut(proto::op::kFsWrite);
  }
  auto& r = *finished;
  if (!r.ok() && r.error().code() == Code::kS004) return SandboxStopped(sb_.id);
  if (!r.ok()) return r;
  auto written = proto::FsWriteResult::FromJson(*r);
  if (!written.ok()) return std::move(written).error().With("reading the agent's fs.write result");
  if (!metadata.empty() && !written->metadata_set)
    return Error(Code::kS219,
                 "operation not supported by this sandbox's agent: fs.write with metadata (the "
                 "file was written without it)");
  nlohmann::json out = written->ToJson();
  out["path"] = path;
  return out;
}

Status FsClient::Read(const std::string& path, const std::function<void(const FsReadMeta&)>& on_meta,
                      const ByteSink& sink) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto so = sb_.client->Open(proto::FsReadRequest{path}.ToJson());
  if (!so.ok()) return OpenFailed(so.error());
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto ev = s->Next(Deadline());  // each event restarts the clock
    if (!ev) {
      s->Cancel();
      return TimedOut(proto::op::kFsRead);
    }
    switch (ev->kind) {
      case proto::Event::Kind::kMeta: {
        auto meta = proto::FsReadMeta::FromJson(ev->json);
        if (!meta.ok()) {
          s->Cancel();
          return std::move(meta).error().With("reading the agent's fs.read META");
        }
        FsReadMeta m;
        m.size = static_cast<uint64_t>(meta->size);
        m.mode = meta->mode;
        m.mtime = meta->mtime;
        if (on_meta) on_meta(m);
        break;
      }
      case proto::Event::Kind::kData:
        if (!sink(ev->data)) {
          s->Cancel();
          return Error(Code::kS216, "fs i/o error: download aborted by the reader");
        }
        if (MonotonicMillis() - last_touch > 1000) {
          sb_.Touch();
          last_touch = MonotonicMillis();
        }
        break;
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult:
        return OkStatus();
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed:
        return AgentConnectionError(AgentCall::kFs, ev->close_reason,
                                    ev->json.value("message", std::string()), sb_.id);
    }
  }
}

}  // namespace skiff
