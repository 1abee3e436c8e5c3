#include "sandbox/dir_watch_client.h"

#include <string>

#include "base/json_limits.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/messages.h"
#include "sandbox/agent_errors.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;

Error Malformed(const std::string& id, const std::string& what) {
  return Error(Code::kS300, "the agent of sandbox " + id + " broke fs.watch: " + what);
}

Error ReaderGone() { return Error(Code::kS216, "fs.watch: the reader went away"); }

}  // namespace

Status WatchDirectory(Sandbox& sb, const std::function<bool()>& stopping, std::chrono::milliseconds timeout,
                      const proto::FsWatchRequest& req, FsWatchSink& sink) {
  sb.Touch();
  ScopedCleanup touch([&] { sb.Touch(); });
  auto so = sb.client->Open(req.ToJson());
  if (!so.ok())
    return OpenFailedError(AgentCall::kFs, so.error(), sb.client->close_reason(), stopping(), sb.id);
  auto s = std::move(so).value();
  (void)s->End(proto::kStdin);
  bool started = false;
  std::string partial;  // an event line not yet whole
  int64_t last_touch = MonotonicMillis();
  for (;;) {
    auto ev = s->Next(Clock::now() + (started ? std::chrono::milliseconds(1000) : timeout));
    if (!ev) {
      // A quiet second is normal once the watch is set: only a reader that
      // went away (or an agent that never answered) ends it.
      if (!started) {
        s->Cancel();
        return Error(Code::kS200, "fs.watch on sandbox " + sb.id + ": the agent did not answer within " +
                                      std::to_string(timeout.count()) + " ms (fs_timeout_ms)");
      }
      if (!sink.Wanted()) {
        s->Cancel();
        return ReaderGone();
      }
      continue;
    }
    switch (ev->kind) {
      case proto::Event::Kind::kMeta: {
        if (started) {
          s->Cancel();
          return Malformed(sb.id, "a second start");
        }
        auto m = proto::EmptyResult::FromJson(ev->json);
        if (!m.ok()) {
          s->Cancel();
          return std::move(m).error().With("reading the agent's fs.watch META");
        }
        started = true;
        if (!sink.OnStart()) {
          s->Cancel();
          return ReaderGone();
        }
        break;
      }
      case proto::Event::Kind::kData: {
        if (!started || ev->channel != proto::kStdout) {
          s->Cancel();
          return Malformed(sb.id, "events before the start, or on a channel other than stdout");
        }
        if (MonotonicMillis() - last_touch >= 1000) {
          sb.Touch();
          last_touch = MonotonicMillis();
        }
        partial.append(ev->data);
        size_t at = 0;
        for (size_t nl; (nl = partial.find('\n', at)) != std::string::npos; at = nl + 1) {
          auto j = ParseJsonBounded(std::string_view(partial).substr(at, nl - at));
          if (j.is_discarded()) {
            s->Cancel();
            return Malformed(sb.id, "an event line that is not JSON");
          }
          auto e = proto::FsWatchEvent::FromJson(j);
          if (!e.ok()) {
            s->Cancel();
            return e.error();
          }
          if (!sink.OnEvent(*e)) {
            s->Cancel();
            return ReaderGone();
          }
        }
        partial.erase(0, at);
        if (partial.size() > proto::kMaxWatchLine) {
          s->Cancel();
          return Malformed(sb.id, "an event line over " + std::to_string(proto::kMaxWatchLine) + " bytes");
        }
        break;
      }
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult:
        if (!partial.empty()) return Malformed(sb.id, "an unfinished event line at the end");
        return OkStatus();
      case proto::Event::Kind::kError:
      case proto::Event::Kind::kClosed:
        return StreamEndedError(AgentCall::kFs, *ev, sb.client->close_reason(), stopping(), sb.id);
    }
  }
}

}  // namespace skiff
