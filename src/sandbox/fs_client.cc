#include "sandbox/fs_client.h"

#include "base/json_limits.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/ops.h"
#include "sandbox/agent_errors.h"

namespace skiff {

namespace {

// Reads a stream to its final event, for fs calls.
Result<nlohmann::json> FinishFs(proto::Stream& s, const std::string& sandbox_id) {
  // A result too large for one frame arrives as DATA on kStdout first.
  std::string spill;
  constexpr size_t kMaxSpill = 80u << 20;
  for (;;) {
    auto ev = s.Next();
    if (!ev) continue;
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel == proto::kStdout && spill.size() + ev->data.size() <= kMaxSpill)
          spill.append(ev->data);
        break;
      case proto::Event::Kind::kResult: {
        if (!ev->json.value("result_in_data", false)) return std::move(ev->json);
        auto j = ParseJsonBounded(spill);
        if (j.is_discarded()) return AgentConnectionError(AgentCall::kFs, "malformed result", sandbox_id);
        return j;
      }
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed:
        return AgentConnectionError(AgentCall::kFs, ev->json.value("message", std::string()), sandbox_id);
      default:
        break;
    }
  }
}

}  // namespace

FsClient::FsClient(Sandbox& sandbox, std::function<bool()> stopping)
    : sb_(sandbox), stopping_(std::move(stopping)) {}

Result<nlohmann::json> FsClient::Call(const nlohmann::json& op) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto s = sb_.client->Open(op);
  if (!s.ok()) return AgentConnectionError(AgentCall::kFs, s.error().message(), sb_.id);
  (void)(*s)->End(proto::kStdin);
  auto r = FinishFs(**s, sb_.id);
  if (!r.ok() && r.error().code() == Code::kS004) return SandboxStopped(sb_.id);
  return r;
}

Result<nlohmann::json> FsClient::Write(const std::string& path, uint32_t mode, bool parents,
                                       const ByteSource& source) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  nlohmann::json op = {{"op", proto::op::kFsWrite}, {"path", path}, {"mode", mode}, {"parents", parents}};
  auto so = sb_.client->Open(op);
  if (!so.ok()) return AgentConnectionError(AgentCall::kFs, so.error().message(), sb_.id);
  auto s = std::move(so).value();
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto chunk = source();
    if (!chunk.ok()) {
      s->Cancel();  // the agent removes its temp file; the target is untouched
      (void)FinishFs(*s, sb_.id);
      // A stop while the body stalled: the call ends as stopped (§2.3), not
      // as a stalled upload.
      if (stopping_()) return SandboxStopped(sb_.id);
      return std::move(chunk).error();
    }
    if (chunk->empty()) {
      (void)s->End(proto::kStdin);
      break;
    }
    if (!s->Send(proto::kStdin, *chunk).ok()) break;  // the agent answered early (an error)
    if (MonotonicMillis() - last_touch > 1000) {
      sb_.Touch();
      last_touch = MonotonicMillis();
    }
  }
  auto r = FinishFs(*s, sb_.id);
  if (!r.ok() && r.error().code() == Code::kS004) return SandboxStopped(sb_.id);
  if (r.ok()) (*r)["path"] = path;
  return r;
}

Status FsClient::Read(const std::string& path, const std::function<void(const FsReadMeta&)>& on_meta,
                      const ByteSink& sink) {
  sb_.Touch();
  ScopedCleanup touch([&] { sb_.Touch(); });
  auto so = sb_.client->Open({{"op", proto::op::kFsRead}, {"path", path}});
  if (!so.ok()) return AgentConnectionError(AgentCall::kFs, so.error().message(), sb_.id);
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto ev = s->Next();
    if (!ev) continue;
    switch (ev->kind) {
      case proto::Event::Kind::kMeta: {
        FsReadMeta m;
        m.size = ev->json.value("size", uint64_t{0});
        m.mode = ev->json.value("mode", std::string("0000"));
        m.mtime = ev->json.value("mtime", int64_t{0});
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
        return AgentConnectionError(AgentCall::kFs, ev->json.value("message", std::string()), sb_.id);
    }
  }
}

}  // namespace skiff
